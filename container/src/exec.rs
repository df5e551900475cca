//! Running a command to completion (output capped, head and tail kept) or streaming its output
//! as it comes. A timeout kills the command's whole process group; a caller that goes away
//! stops it (SIGTERM, then SIGKILL).

use crate::error::{ApiError, Result};
use crate::group::{self, signal, STOP_GRACE};
use crate::sandbox::{Registry, Sandbox};
use handoff_wire::{
    ExecEvent, ExecRequest, ExecResult, HeadTail, EXEC_MAX_TIMEOUT_MS, EXEC_OUTPUT_CAP,
};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::{mpsc, OwnedRwLockReadGuard};

fn check_timeout(timeout_ms: u64) -> Result<Duration> {
    if timeout_ms == 0 || timeout_ms > EXEC_MAX_TIMEOUT_MS {
        return Err(ApiError::bad_request(format!(
            "timeout must be between 1 ms and {EXEC_MAX_TIMEOUT_MS} ms (10 minutes); use a \
             background process for longer work"
        )));
    }
    Ok(Duration::from_millis(timeout_ms))
}

/// Starts `argv` in the sandbox with piped output.
pub async fn spawn(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    argv: &[String],
    cwd: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Result<Child> {
    let cwd = sandbox.resolve_cwd(cwd)?;
    let running = registry.ensure_running(sandbox).await?;
    let mut cmd = sandbox.command(&running, argv, &cwd, env)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn()
        .map_err(|e| ApiError::internal(format!("could not start the command: {e}")))
}

/// Kills the process group led by `child`.
pub fn kill_group(child: &Child) {
    if let Some(pid) = child.id() {
        signal(pid as i32, libc::SIGKILL);
    }
}

/// Stops a command whose caller went away: SIGTERM to its process group, so it can clean up
/// (git removes its `index.lock`, which SIGKILL would leave behind and so fail every git
/// command after it), then SIGKILL to whatever of the group is left [`STOP_GRACE`] later.
async fn stop_group(child: &mut Child) -> Option<std::process::ExitStatus> {
    let Some(pgid) = child.id().map(|pid| pid as i32) else {
        return child.wait().await.ok();
    };
    signal(pgid, libc::SIGTERM);
    // The leader is reaped meanwhile; the group lives on while any of it is left.
    let (status, gone) = tokio::join!(
        tokio::time::timeout(STOP_GRACE, child.wait()),
        group::gone_within(pgid, STOP_GRACE)
    );
    if !gone {
        signal(pgid, libc::SIGKILL);
    }
    match status {
        Ok(status) => status.ok(),
        Err(_) => child.wait().await.ok(),
    }
}

/// The command of a request that waits for it to end: stopped ([`stop_group`], holding the
/// sandbox's gate until it is gone) when the request is dropped first, as when its caller goes
/// away — the answer can no longer reach anyone, and a retry must not meet it still running.
struct Attended {
    child: Option<Child>,
    gate: Option<OwnedRwLockReadGuard<()>>,
}

impl Attended {
    /// Waits up to `timeout` for the command to end (killing its group after it); whether it
    /// timed out.
    async fn wait(&mut self, timeout: Duration) -> (Option<std::process::ExitStatus>, bool) {
        let Some(child) = self.child.as_mut() else {
            return (None, false);
        };
        let outcome = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.ok(), false),
            Err(_) => {
                kill_group(child);
                (child.wait().await.ok(), true)
            }
        };
        self.child = None;
        outcome
    }
}

impl Drop for Attended {
    fn drop(&mut self) {
        let (Some(mut child), gate) = (self.child.take(), self.gate.take()) else {
            return;
        };
        // Outside a runtime (never, in the daemon) the child's `kill_on_drop` ends the leader.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _gate = gate;
                stop_group(&mut child).await;
            });
        }
    }
}

/// The program to run: `argv` as given, or the shell command line through `/bin/sh -c`.
pub fn program(command: &str, argv: Option<&Vec<String>>) -> Result<Vec<String>> {
    match argv {
        Some(argv) if argv.first().is_some_and(|p| !p.is_empty()) => Ok(argv.clone()),
        Some(_) => Err(ApiError::bad_request("argv must name a program")),
        None if command.trim().is_empty() => {
            Err(ApiError::bad_request("command must not be empty"))
        }
        None => Ok(vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            command.to_string(),
        ]),
    }
}

/// Runs a command (shell line or argv) to completion.
pub async fn run(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    req: &ExecRequest,
) -> Result<ExecResult> {
    let argv = program(&req.command, req.argv.as_ref())?;
    let _credentials = sandbox.credentials.grant(&req.credentials)?;
    run_argv(
        registry,
        sandbox,
        &argv,
        req.cwd.as_deref(),
        &req.env,
        req.timeout_ms,
    )
    .await
}

/// Runs a program with arguments (never through a shell) to completion.
pub async fn run_argv(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    argv: &[String],
    cwd: Option<&str>,
    env: &BTreeMap<String, String>,
    timeout_ms: u64,
) -> Result<ExecResult> {
    let timeout = check_timeout(timeout_ms)?;
    let gate = sandbox.gate.shared_owned().await?;
    let started = Instant::now();
    let mut child = spawn(registry, sandbox, argv, cwd, env).await?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_task = tokio::spawn(capture(stdout));
    let err_task = tokio::spawn(capture(stderr));
    let mut attended = Attended {
        child: Some(child),
        gate: Some(gate),
    };
    let (status, timed_out) = attended.wait(timeout).await;
    // A background grandchild may hold the pipes open; do not wait for it forever.
    let grace = Duration::from_secs(2);
    let out = tokio::time::timeout(grace, out_task)
        .await
        .ok()
        .and_then(Result::ok);
    let err = tokio::time::timeout(grace, err_task)
        .await
        .ok()
        .and_then(Result::ok);
    let out = out.unwrap_or_else(|| HeadTail::new(EXEC_OUTPUT_CAP));
    let err = err.unwrap_or_else(|| HeadTail::new(EXEC_OUTPUT_CAP));
    let truncated = out.truncated() || err.truncated();
    Ok(ExecResult {
        stdout: out.finish(),
        stderr: err.finish(),
        exit_code: status.and_then(|s| s.code()),
        duration_ms: started.elapsed().as_millis() as u64,
        truncated,
        timed_out,
    })
}

async fn capture(stream: Option<impl AsyncRead + Unpin>) -> HeadTail {
    let mut buf = HeadTail::new(EXEC_OUTPUT_CAP);
    if let Some(mut stream) = stream {
        let mut chunk = vec![0u8; 16 * 1024];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            buf.push(&chunk[..n]);
        }
    }
    buf
}

/// Runs a command and sends its output as events while it runs; the last event is `Exit`.
pub async fn stream(
    registry: Arc<Registry>,
    sandbox: Arc<Sandbox>,
    req: ExecRequest,
) -> Result<mpsc::Receiver<ExecEvent>> {
    let timeout = check_timeout(req.timeout_ms)?;
    let argv = program(&req.command, req.argv.as_ref())?;
    let credentials = sandbox.credentials.grant(&req.credentials)?;
    let gate = sandbox.gate.shared_owned().await?;
    let started = Instant::now();
    let mut child = spawn(&registry, &sandbox, &argv, req.cwd.as_deref(), &req.env).await?;
    let (tx, rx) = mpsc::channel(64);
    let forward = |stream: Option<Box<dyn AsyncRead + Unpin + Send>>,
                   is_err: bool,
                   tx: mpsc::Sender<ExecEvent>| async move {
        let Some(mut stream) = stream else { return };
        let mut chunk = vec![0u8; 8 * 1024];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            let data = String::from_utf8_lossy(&chunk[..n]).into_owned();
            let event = if is_err {
                ExecEvent::Stderr { data }
            } else {
                ExecEvent::Stdout { data }
            };
            if tx.send(event).await.is_err() {
                break;
            }
        }
    };
    let out = child
        .stdout
        .take()
        .map(|s| Box::new(s) as Box<dyn AsyncRead + Unpin + Send>);
    let err = child
        .stderr
        .take()
        .map(|s| Box::new(s) as Box<dyn AsyncRead + Unpin + Send>);
    let out_task = tokio::spawn(forward(out, false, tx.clone()));
    let err_task = tokio::spawn(forward(err, true, tx.clone()));
    tokio::spawn(async move {
        let _gate = gate;
        let _credentials = credentials;
        let (status, timed_out) = tokio::select! {
            status = child.wait() => (status.ok(), false),
            _ = tokio::time::sleep(timeout) => {
                kill_group(&child);
                (child.wait().await.ok(), true)
            }
            _ = tx.closed() => {
                // The client went away: stop the command rather than leave it running.
                (stop_group(&mut child).await, false)
            }
        };
        let grace = Duration::from_secs(2);
        let _ = tokio::time::timeout(grace, out_task).await;
        let _ = tokio::time::timeout(grace, err_task).await;
        let _ = tx
            .send(ExecEvent::Exit {
                exit_code: status.and_then(|s| s.code()),
                duration_ms: started.elapsed().as_millis() as u64,
                timed_out,
            })
            .await;
    });
    Ok(rx)
}
