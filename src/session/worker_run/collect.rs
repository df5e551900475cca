//! Ending a worker run: its logs (head and tail kept, secrets redacted) and output files to R2,
//! `result.json` read, redacted and checked against the manifest's schema, the outcome to the
//! ledger, and the sandbox removed. A worker that needs approval stops at its gate instead
//! after its first pass (`gate.rs`).

use super::DIR;
use crate::artifacts;
use crate::error::{Error, ErrorKind, Result};
use crate::runs::{RunError, RunErrorCode, RunOutcome, RunRecord, RunStatus};
use crate::sandbox::api::{ListFiles, Logs, Process, ReadFile, SandboxClient};
use crate::session::driver::{Driver, Next};
use crate::session::policy;
use crate::session::store::{self, Current};
use crate::workers::redact::Redactor;
use crate::workers::result_schema;
use crate::workers::{Manifest, OutputFile, WorkerOutcome, WorkerRunSpec};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::{Encoding, FileKind, LARGE_READ_CAP};
use serde_json::{json, Value};

/// Largest `result.json` kept.
const RESULT_MAX: usize = 64 * 1024;
/// Most output files kept, and their largest total.
const MAX_OUTPUTS: usize = 20;
const OUTPUTS_MAX_BYTES: u64 = 20 * 1024 * 1024;
/// Characters of log kept in the run record (the rest is in R2).
const TAIL_CHARS: usize = 2000;

/// How a pass ended.
pub(super) struct Ended {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    /// Agent mode: every tool call.
    pub tool_calls: Vec<crate::workers::ToolCall>,
}

impl Driver<'_> {
    pub(super) async fn collect(
        &self,
        current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        self.progress(&current, "collecting the logs, result and outputs")
            .await?;
        let version = self.worker_version(spec, false).await?;
        let manifest = &version.manifest;
        let redactor = self.redactor(manifest).await?;
        let ended = match spec.runtime {
            crate::workers::Runtime::Skill => self.agent_ended(&current, &redactor).await?,
            _ => self.script_ended(&current, &redactor).await?,
        };
        let state = current.worker.clone().unwrap_or_default();
        let clean = ended.exit_code == Some(0) && !ended.timed_out;
        if manifest.approvals.required && !state.apply && clean {
            return self
                .request_approval(current, run, manifest, &redactor, &ended)
                .await;
        }
        self.finish_worker(current, run, manifest, &redactor, ended)
            .await
    }

    async fn script_ended(&self, current: &Current, redactor: &Redactor) -> Result<Ended> {
        let state = current.worker.clone().unwrap_or_default();
        let process = state
            .process
            .ok_or_else(|| Error::internal("the worker's process is not known"))?;
        let sandbox = self.sandbox()?;
        let info = sandbox.call(Process { id: process }).await?;
        let logs = sandbox.call(Logs { id: process }).await?;
        let ran = info.ended_at.unwrap_or(info.started_at) - info.started_at;
        Ok(Ended {
            exit_code: info.exit_code,
            timed_out: info.timed_out || state.timed_out,
            duration_ms: state.earlier_ms + ran.max(0) as u64,
            stdout: redactor.text(&logs.stdout),
            stderr: redactor.text(&logs.stderr),
            truncated: logs.truncated,
            tool_calls: Vec::new(),
        })
    }

    /// Stores what the run produced, reports the end to the ledger and removes the sandbox.
    async fn finish_worker(
        &self,
        current: Current,
        run: &RunRecord,
        manifest: &Manifest,
        redactor: &Redactor,
        ended: Ended,
    ) -> Result<Next> {
        let sandbox = self.sandbox()?;
        let logs =
            json!({"stdout": ended.stdout, "stderr": ended.stderr, "truncated": ended.truncated});
        // A bucket that refuses the logs or an output is waited for (the sandbox keeps them):
        // the step fails as unavailable and is tried again.
        self.put_artifact(
            &artifacts::logs_key(&run.id),
            logs.to_string().into_bytes(),
            "application/json",
        )
        .await?;
        let logs_stored = true;
        let mut problems = Vec::new();
        let mut result = match read_result(&sandbox, redactor).await {
            Ok(result) => result,
            Err(why) => {
                problems.push(why);
                None
            }
        };
        // An agent's answer is its result unless the worker asks for a structured one.
        if result.is_none()
            && manifest.runtime == crate::workers::Runtime::Skill
            && manifest.outputs.result_schema.is_none()
            && !ended.stdout.is_empty()
        {
            result = Some(json!({"answer": ended.stdout}));
        }
        if let Some(schema) = &manifest.outputs.result_schema {
            match &result {
                None if problems.is_empty() => problems.push("result.json is missing".into()),
                Some(value) => problems.extend(
                    result_schema::validate(schema, value)
                        .into_iter()
                        .map(|p| format!("result.json: {p}")),
                ),
                None => {}
            }
        }
        let outputs = self
            .store_outputs(&sandbox, &run.id, manifest, redactor, &mut problems)
            .await?;
        let state = current.worker.clone().unwrap_or_default();
        let outcome = WorkerOutcome {
            exit_code: ended.exit_code,
            duration_ms: ended.duration_ms,
            result,
            outputs,
            log_tail: tail(&ended.stdout, &ended.stderr),
            logs_stored,
            tool_calls: ended.tool_calls.clone(),
            attempts: state.attempts,
        };
        let (status, error) = verdict(manifest, &ended, &problems);
        let summary = summary(&outcome, ended.timed_out);
        let record = RunOutcome {
            summary: Some(summary),
            tokens: Some(current.detail.tokens.clone()),
            cost_usd: Some(current.detail.cost_usd),
            worker: Some(outcome),
            ..RunOutcome::default()
        };
        self.release_worker(&current).await;
        self.transition(&run.id, status, error, Some(record))
            .await?;
        store::clear_current(&self.sql)?;
        Ok(Next::Now)
    }

    /// Every file under `outputs/` (to R2, redacted), and problems for declared ones missing.
    async fn store_outputs(
        &self,
        sandbox: &SandboxClient,
        run_id: &str,
        manifest: &Manifest,
        redactor: &Redactor,
        problems: &mut Vec<String>,
    ) -> Result<Vec<OutputFile>> {
        let mut found = Vec::new();
        let mut dirs = vec![String::new()];
        while let Some(dir) = dirs.pop() {
            let listing = sandbox
                .call(ListFiles {
                    path: format!("{DIR}/outputs/{dir}"),
                })
                .await;
            let Ok(listing) = listing else { continue };
            for entry in listing.entries {
                let path = format!("{dir}{}", entry.name);
                match entry.kind {
                    FileKind::Dir if dirs.len() < 50 => dirs.push(format!("{path}/")),
                    FileKind::File => found.push((path, entry.size)),
                    _ => {}
                }
            }
        }
        found.sort();
        let mut outputs = Vec::new();
        let mut total = 0u64;
        for (path, size) in found {
            if outputs.len() >= MAX_OUTPUTS || total + size > OUTPUTS_MAX_BYTES {
                problems.push(format!(
                    "outputs/{path} was not kept: at most {MAX_OUTPUTS} files and 20 MiB in all"
                ));
                continue;
            }
            let read = sandbox
                .call(ReadFile {
                    path: format!("{DIR}/outputs/{path}"),
                    encoding: Encoding::Base64,
                    max: Some(LARGE_READ_CAP),
                })
                .await;
            let bytes = match read.map(|f| B64.decode(f.content)) {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(_)) => continue,
                Err(e) => {
                    problems.push(format!("outputs/{path} could not be read: {}", e.message));
                    continue;
                }
            };
            let (bytes, _) = redactor.bytes(&bytes);
            total += bytes.len() as u64;
            let media_type = manifest
                .outputs
                .files
                .iter()
                .find(|o| o.path == path)
                .map(|o| o.media_type.clone())
                .unwrap_or_else(|| crate::workers::files::media_type_of(&path).to_string());
            let sha256 = crate::mac::sha256_hex(&bytes);
            let size = bytes.len() as u64;
            self.put_artifact(&artifacts::output_key(run_id, &path), bytes, &media_type)
                .await?;
            outputs.push(OutputFile {
                path,
                size,
                media_type,
                sha256,
            });
        }
        for declared in manifest.outputs.files.iter().filter(|o| o.required) {
            if !outputs.iter().any(|o| o.path == declared.path) {
                problems.push(format!(
                    "the required output outputs/{} is missing",
                    declared.path
                ));
            }
        }
        Ok(outputs)
    }

    /// Writes `bytes` to the bucket at `key`; a refusal is `Unavailable` (worth waiting out).
    pub(in crate::session) async fn put_artifact(
        &self,
        key: &str,
        bytes: Vec<u8>,
        media_type: &str,
    ) -> Result<()> {
        let bucket = self.env.bucket(artifacts::BUCKET)?;
        bucket
            .put(key, worker::Data::Bytes(bytes))
            .http_metadata(worker::HttpMetadata {
                content_type: Some(media_type.to_string()),
                ..Default::default()
            })
            .execute()
            .await
            .map_err(|e| Error::unavailable(format!("{} {key}: {e}", policy::STORAGE_REFUSED)))?;
        Ok(())
    }
}

/// `result.json`, parsed and redacted; `None` when the worker wrote none.
async fn read_result(
    sandbox: &SandboxClient,
    redactor: &Redactor,
) -> Result<Option<Value>, String> {
    let read = sandbox
        .call(ReadFile {
            path: format!("{DIR}/result.json"),
            encoding: Encoding::Text,
            max: None,
        })
        .await;
    let file = match read {
        Ok(file) => file,
        Err(e) if e.kind == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("result.json could not be read: {}", e.message)),
    };
    if file.content.len() > RESULT_MAX {
        return Err(format!(
            "result.json is {} bytes; at most {RESULT_MAX} (put large data in outputs/)",
            file.content.len()
        ));
    }
    let value: Value =
        serde_json::from_str(&file.content).map_err(|e| format!("result.json is not JSON: {e}"))?;
    Ok(Some(redactor.json(&value)))
}

/// The run's status and error from how it ended and what it left.
fn verdict(
    manifest: &Manifest,
    ended: &Ended,
    problems: &[String],
) -> (RunStatus, Option<RunError>) {
    let fail = |code, message: String| (RunStatus::Failed, Some(RunError { code, message }));
    if ended.timed_out {
        return fail(
            RunErrorCode::TimedOut,
            format!(
                "the worker ran longer than its limit ({} s, limits.timeout) and was stopped",
                manifest.limits.timeout_seconds
            ),
        );
    }
    match ended.exit_code {
        Some(0) => {}
        code => {
            let last = ended
                .stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| format!(": {}", crate::error::excerpt(l.trim())))
                .unwrap_or_default();
            let how = code.map_or("was killed by a signal".to_string(), |c| {
                format!("exited with code {c}")
            });
            return fail(
                RunErrorCode::WorkerFailed,
                format!("the worker {how}{last}"),
            );
        }
    }
    if !problems.is_empty() {
        return fail(RunErrorCode::OutputInvalid, problems.join("; "));
    }
    (RunStatus::Completed, None)
}

fn summary(outcome: &WorkerOutcome, timed_out: bool) -> String {
    let how = match (timed_out, outcome.exit_code) {
        (true, _) => "timed out".to_string(),
        (false, Some(code)) => format!("exit {code}"),
        (false, None) => "killed".to_string(),
    };
    let mut parts = vec![format!(
        "{how} after {:.1} s",
        outcome.duration_ms as f64 / 1000.0
    )];
    if !outcome.outputs.is_empty() {
        parts.push(format!("{} output file(s)", outcome.outputs.len()));
    }
    if outcome.result.is_some() {
        parts.push("result.json".into());
    }
    parts.join(", ")
}

/// The last characters of the log, stderr after stdout.
fn tail(stdout: &str, stderr: &str) -> String {
    let text = super::script::live_text(stdout, stderr);
    let count = text.chars().count();
    text.chars()
        .skip(count.saturating_sub(TAIL_CHARS))
        .collect()
}
