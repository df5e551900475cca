//! A script worker's pass: its entrypoint started as a background process of the sandbox with
//! the worker's secrets and handoff's variables in its environment only, followed every poll
//! (the redacted tail of its log goes to the ledger as it grows), killed at its time limit, and
//! started once more if a restart lost it.

use super::DIR;
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::WorkerLog;
use crate::runs::{RunErrorCode, RunRecord};
use crate::sandbox::api::{Kill, Logs, Process, Spawn};
use crate::session::driver::{Driver, Next};
use crate::session::store::{Current, Phase, WorkerState};
use crate::time::now_ms;
use crate::workers::{Manifest, WorkerRunSpec};
use handoff_wire::{StartProcess, EXEC_MAX_TIMEOUT_MS};
use std::collections::BTreeMap;

/// How many times a pass's script is started before a lost process fails the run.
const MAX_ATTEMPTS: u32 = 2;
/// Lines of each stream the live log shows.
const LIVE_LINES: usize = 30;

impl Driver<'_> {
    pub(super) async fn execute(
        &self,
        mut current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        let mut state = current.worker.clone().unwrap_or_default();
        let Some(process) = state.process else {
            return self.start_script(current, run, spec).await;
        };
        let sandbox = self.sandbox()?;
        let info = match sandbox.call(Process { id: process }).await {
            Ok(info) => info,
            Err(e) if e.kind == ErrorKind::NotFound => return self.lost(current, state).await,
            Err(e) => return Err(e),
        };
        let now = now_ms();
        if info.running {
            if state.deadline.is_some_and(|d| now > d) {
                let _ = sandbox.call(Kill { id: process }).await;
                state.timed_out = true;
                current.worker = Some(state);
                current.phase = Phase::Collecting;
                self.save(&current)?;
                return Ok(Next::Now);
            }
            let since = state.started_at.unwrap_or(now);
            self.progress(
                &current,
                &format!("running for {} s", (now - since).max(0) / 1000),
            )
            .await?;
            self.report_live_log(&mut current, spec, process).await?;
            return Ok(Next::After(config::poll_interval_ms(self.env)));
        }
        self.report_live_log(&mut current, spec, process).await?;
        current.phase = Phase::Collecting;
        self.save(&current)?;
        Ok(Next::Now)
    }

    async fn start_script(
        &self,
        mut current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        let version = self.worker_version(spec, false).await?;
        let manifest = &version.manifest;
        let Some(secrets) = self.worker_secrets(&current, manifest).await? else {
            return Ok(Next::Now);
        };
        let (argv, extra) = manifest
            .command()
            .ok_or_else(|| Error::internal("a skill has no script to run"))?;
        let mut state = current.worker.clone().unwrap_or_default();
        let mut env = secrets;
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env.extend(handoff_env(run, spec, manifest, &state));
        let limit_ms = manifest.limits.timeout_seconds * 1000;
        let request = StartProcess {
            command: String::new(),
            argv: Some(argv.clone()),
            cwd: Some(DIR.to_string()),
            env,
            // The daemon keeps limits up to its maximum; longer ones the driver keeps.
            timeout_ms: Some(limit_ms.min(EXEC_MAX_TIMEOUT_MS)),
            // One per pass and attempt (counted once it started): an attempt whose start is
            // sent again after its reply was lost gets the script started then, not a second.
            key: Some(format!(
                "{}-{}-{}",
                run.id,
                if state.apply { "apply" } else { "script" },
                state.attempts
            )),
        };
        let info = self.sandbox()?.call(Spawn { request }).await?;
        if run.status == crate::runs::RunStatus::Starting {
            self.transition(&run.id, crate::runs::RunStatus::Running, None, None)
                .await?;
        }
        let now = now_ms();
        state.process = Some(info.id);
        state.attempts += 1;
        state.started_at = Some(now);
        state.deadline = Some(now + limit_ms as i64);
        state.log_digest = None;
        current.worker = Some(state.clone());
        self.save(&current)?;
        let again = if state.attempts > 1 {
            " (again, after a restart cut it off)"
        } else {
            ""
        };
        self.progress(&current, &format!("started {}{again}", argv.join(" ")))
            .await?;
        Ok(Next::After(config::poll_interval_ms(self.env)))
    }

    /// The script's process is gone without an end (the sandbox or its daemon restarted): start
    /// the pass over once, from a freshly prepared sandbox; then give up saying so.
    async fn lost(&self, mut current: Current, mut state: WorkerState) -> Result<Next> {
        if state.attempts >= MAX_ATTEMPTS {
            let message = format!(
                "the worker's process was lost {} times (its sandbox or the sandbox daemon \
                 restarted while it ran); whatever it had done in the sandbox is gone. Run it again",
                state.attempts
            );
            self.fail(&current, RunErrorCode::Interrupted, message)
                .await?;
            return Ok(Next::Now);
        }
        state.process = None;
        current.worker = Some(state);
        current.phase = Phase::Preparing;
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// Sends the redacted tail of the script's log to the ledger when it changed.
    async fn report_live_log(
        &self,
        current: &mut Current,
        spec: &WorkerRunSpec,
        process: u64,
    ) -> Result<()> {
        let Ok(logs) = self.sandbox()?.call(Logs { id: process }).await else {
            return Ok(());
        };
        let text = live_text(&logs.stdout, &logs.stderr);
        let digest = crate::mac::sha256_hex(text.as_bytes());
        let Some(state) = current.worker.as_mut() else {
            return Ok(());
        };
        if text.is_empty() || state.log_digest.as_deref() == Some(digest.as_str()) {
            return Ok(());
        }
        state.log_digest = Some(digest);
        let version = self.worker_version(spec, false).await?;
        let redacted = self.redactor(&version.manifest).await?.text(&text);
        self.ledger()?
            .call(WorkerLog {
                run_id: current.run_id.clone(),
                text: redacted,
            })
            .await?;
        self.save(current)
    }
}

/// What handoff tells every worker process, beside its secrets.
pub(super) fn handoff_env(
    run: &RunRecord,
    spec: &WorkerRunSpec,
    manifest: &Manifest,
    state: &WorkerState,
) -> BTreeMap<String, String> {
    let phase = match (manifest.approvals.required, state.apply) {
        (false, _) => "run",
        (true, false) => "propose",
        (true, true) => "apply",
    };
    BTreeMap::from([
        ("HANDOFF_RUN_ID".into(), run.id.clone()),
        ("HANDOFF_WORKER".into(), spec.worker.clone()),
        ("HANDOFF_WORKER_VERSION".into(), spec.version.to_string()),
        ("HANDOFF_TRIGGER".into(), spec.trigger.as_str().to_string()),
        ("HANDOFF_PHASE".into(), phase.into()),
        ("HANDOFF_INPUTS".into(), format!("{DIR}/inputs.json")),
        ("HANDOFF_OUTPUTS".into(), format!("{DIR}/outputs")),
        ("HANDOFF_RESULT".into(), format!("{DIR}/result.json")),
        ("PYTHONUNBUFFERED".into(), "1".into()),
    ])
}

/// The last lines of each stream, stderr's marked.
pub(super) fn live_text(stdout: &str, stderr: &str) -> String {
    let tail = |text: &str| -> Vec<String> {
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(LIVE_LINES);
        lines[from..].iter().map(|l| l.to_string()).collect()
    };
    let mut out = tail(stdout);
    out.extend(tail(stderr).into_iter().map(|l| format!("[stderr] {l}")));
    out.join("\n")
}
