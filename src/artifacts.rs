//! Where things live in the deployment's R2 bucket: the one place that names the bucket's binding
//! and lays out its keys.
//!
//! - `runs/<run id>/transcript.json`: a finished run's OpenCode transcript (written once when the
//!   run ends; read by the run page).
//! - `runs/<run id>/change.diff`: a finished run's change as a unified diff (written once when it
//!   is pushed; read as the `handoff://runs/<id>/diff` resource).
//! - `runs/<run id>/logs.json`: a finished worker run's logs (head and tail kept, secrets
//!   redacted).
//! - `runs/<run id>/outputs/<path>`: a worker run's output files (served through signed links).
//! - `uploads/<sha256>`: files given for worker inputs, by content (a replay reuses them).
//! - `webhooks/<worker>/<sha256>.json`: webhook payloads, by delivery.
//! - `sandboxes/<sandbox id>/workspace-<ms>.tar.gz`: a sandbox's workspace snapshot (written on
//!   pause and when idle, the previous one deleted; deleted with the sandbox).

use crate::names::named_enum;

/// R2 binding of the artifacts bucket (wrangler.toml).
pub const BUCKET: &str = "ARTIFACTS";

named_enum! {
/// What a finished run stores beside its record. When the bucket refuses a write, the run's
/// session keeps the text and writes it later (`session::outbox`); meanwhile the run's result
/// lists it as pending.
#[derive(schemars::JsonSchema)]
pub enum Artifact {
    /// The agent's transcript.
    Transcript,
    /// The change as a unified diff.
    Diff,
}
}

impl Artifact {
    /// Where the run's artifact lives.
    pub fn key(self, run_id: &str) -> String {
        match self {
            Artifact::Transcript => transcript_key(run_id),
            Artifact::Diff => diff_key(run_id),
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Artifact::Transcript => "application/json",
            Artifact::Diff => "text/x-diff; charset=utf-8",
        }
    }
}

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

/// A worker run's logs.
pub fn logs_key(run_id: &str) -> String {
    format!("runs/{run_id}/logs.json")
}

/// One of a worker run's output files (`path` is under `outputs/`).
pub fn output_key(run_id: &str, path: &str) -> String {
    format!("runs/{run_id}/outputs/{path}")
}

/// A file given for a worker input, by its SHA-256.
pub fn input_file_key(sha256: &str) -> String {
    format!("uploads/{sha256}")
}

/// A webhook payload of `worker`, by the digest of its delivery.
pub fn webhook_key(worker: &str, delivery_sha256: &str) -> String {
    format!("webhooks/{worker}/{delivery_sha256}.json")
}
