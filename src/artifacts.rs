//! Where things live in the deployment's R2 bucket: the one place that names the bucket's binding
//! and lays out its keys.
//!
//! - `runs/<run id>/transcript.json`: a finished run's OpenCode transcript (written once when the
//!   run ends; read by the run page).
//! - `runs/<run id>/change.diff`: a finished run's change as a unified diff (written once when it
//!   is pushed; read as the `handoff://runs/<id>/diff` resource).
//! - `sandboxes/<sandbox id>/workspace-<ms>.tar.gz`: a sandbox's workspace snapshot (written on
//!   pause and when idle, the previous one deleted; deleted with the sandbox).

/// R2 binding of the artifacts bucket (wrangler.toml).
pub const BUCKET: &str = "ARTIFACTS";

/// A run's transcript.
pub fn transcript_key(run_id: &str) -> String {
    format!("runs/{run_id}/transcript.json")
}

/// A run's change as a unified diff.
pub fn diff_key(run_id: &str) -> String {
    format!("runs/{run_id}/change.diff")
}

/// A sandbox's workspace snapshot taken at `at_ms`.
pub fn snapshot_key(sandbox_id: &str, at_ms: i64) -> String {
    format!("sandboxes/{sandbox_id}/workspace-{at_ms}.tar.gz")
}
