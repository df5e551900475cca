//! Background processes of a sandbox: started detached from any request, output written to log
//! files in the sandbox directory (outside the workspace), listed, read and killed by id.

use crate::clock::now_ms;
use crate::error::{ApiError, Result};
use crate::group::{self, signal, STOP_GRACE};
use crate::sandbox::{Registry, Sandbox};
use table::{Entry, MAX_TRACKED};

mod oom;
pub mod table;
use handoff_wire::{
    ProcessInfo, ProcessLogs, StartProcess, EXEC_MAX_TIMEOUT_MS, EXEC_OUTPUT_CAP, PROCESS_KEY_MAX,
};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub async fn start(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    req: &StartProcess,
) -> Result<ProcessInfo> {
    let argv = crate::exec::program(&req.command, req.argv.as_ref())?;
    if req
        .timeout_ms
        .is_some_and(|t| t == 0 || t > EXEC_MAX_TIMEOUT_MS)
    {
        return Err(ApiError::bad_request(format!(
            "timeout_ms must be 1 to {EXEC_MAX_TIMEOUT_MS}"
        )));
    }
    let table = &sandbox.processes;
    let _keyed = match &req.key {
        Some(key) => {
            if key.is_empty() || key.len() > PROCESS_KEY_MAX {
                return Err(ApiError::bad_request(format!(
                    "key must be 1 to {PROCESS_KEY_MAX} bytes"
                )));
            }
            let one_at_a_time = table.keyed_start.lock().await;
            if let Some(started) = table.keyed(key) {
                return Ok(started);
            }
            Some(one_at_a_time)
        }
        None => None,
    };
    table.prune();
    if table.running_count() >= MAX_TRACKED {
        return Err(ApiError::conflict(format!(
            "this sandbox already runs {MAX_TRACKED} background processes; kill some first"
        )));
    }
    let _shared = sandbox.gate.shared().await?;
    let cwd = sandbox.resolve_cwd(req.cwd.as_deref())?;
    let running = registry.ensure_running(sandbox).await?;
    let id = table.next.fetch_add(1, Ordering::SeqCst);
    std::fs::create_dir_all(&table.logs)?;
    std::fs::set_permissions(
        &table.logs,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )?;
    let (out_path, err_path) = table.log_paths(id);
    let mut cmd = sandbox.command(&running, &argv, &cwd, &req.env)?;
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .kill_on_drop(false);
    // Taken before the start: the process may run (and end) before `spawn` returns to us.
    let started_at = now_ms();
    let mut child = cmd
        .spawn()
        .map_err(|e| ApiError::internal(format!("could not start the process: {e}")))?;
    let info = ProcessInfo {
        id,
        command: req
            .argv
            .as_ref()
            .map_or_else(|| req.command.clone(), |a| a.join(" ")),
        started_at,
        running: true,
        exit_code: None,
        ended_at: None,
        timed_out: false,
        frozen: false,
    };
    let entry = Arc::new(Mutex::new(Entry {
        info: info.clone(),
        pgid: child.id().map(|p| p as i32),
        key: req.key.clone(),
        oom_saved: Default::default(),
    }));
    table.lock().insert(id, entry.clone());
    let limit = req.timeout_ms.map(Duration::from_millis);
    let pgid = child.id().map(|p| p as i32);
    tokio::spawn(async move {
        let mut timed_out = false;
        let status = match limit {
            None => child.wait().await.ok(),
            Some(limit) => match tokio::time::timeout(limit, child.wait()).await {
                Ok(status) => status.ok(),
                Err(_) => {
                    timed_out = true;
                    if let Some(pgid) = pgid {
                        signal(pgid, libc::SIGKILL);
                    }
                    child.wait().await.ok()
                }
            },
        };
        if let Ok(mut e) = entry.lock() {
            e.info.running = false;
            e.info.exit_code = status.and_then(|s| s.code());
            e.info.ended_at = Some(now_ms());
            e.info.timed_out = timed_out;
            e.info.frozen = false;
        }
    });
    Ok(info)
}

pub fn logs(sandbox: &Sandbox, id: u64) -> Result<ProcessLogs> {
    sandbox.processes.get(id)?;
    let (out, err) = sandbox.processes.log_paths(id);
    let (stdout, t1) = tail(&out)?;
    let (stderr, t2) = tail(&err)?;
    Ok(ProcessLogs {
        stdout,
        stderr,
        truncated: t1 || t2,
    })
}

/// A log file, or its first and last `EXEC_OUTPUT_CAP / 2` bytes when it is longer.
fn tail(path: &PathBuf) -> Result<(String, bool)> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok((String::new(), false));
    };
    let len = file.metadata()?.len();
    let cap = EXEC_OUTPUT_CAP as u64;
    if len <= cap {
        let mut all = Vec::new();
        file.read_to_end(&mut all)?;
        return Ok((String::from_utf8_lossy(&all).into_owned(), false));
    }
    let half = cap / 2;
    let mut head = vec![0u8; half as usize];
    file.read_exact(&mut head)?;
    file.seek(SeekFrom::End(-(half as i64)))?;
    let mut end = Vec::new();
    file.read_to_end(&mut end)?;
    let text = format!(
        "{}\n[… {} bytes omitted …]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * half,
        String::from_utf8_lossy(&end)
    );
    Ok((text, true))
}

/// Stops (`frozen`) or continues a running process's whole group. A frozen process keeps its
/// memory and state and uses no CPU, and is the first the OOM killer takes (`oom.rs`); it is
/// thawed, or killed like any other. One that lost a member while frozen is ended when thawed
/// (it answers as not running). Freezing a process that ended is refused; thawing one is not
/// (it answers with the process as it is).
pub async fn set_frozen(sandbox: &Sandbox, id: u64, frozen: bool) -> Result<ProcessInfo> {
    let entry = sandbox.processes.get(id)?;
    let broken = {
        let mut e = entry
            .lock()
            .map_err(|_| ApiError::internal("process table poisoned"))?;
        match (e.pgid, e.info.running) {
            (Some(pgid), true) if frozen => {
                signal(pgid, libc::SIGSTOP);
                if !e.info.frozen {
                    e.oom_saved = oom::mark_frozen(pgid);
                }
                e.info.frozen = true;
                false
            }
            (Some(pgid), true) => {
                let whole = oom::restore(pgid, std::mem::take(&mut e.oom_saved));
                signal(pgid, if whole { libc::SIGCONT } else { libc::SIGKILL });
                e.info.frozen = false;
                !whole
            }
            _ if frozen => {
                return Err(ApiError::conflict(format!(
                    "process {id} is not running; only a running process can be frozen"
                )))
            }
            _ => false,
        }
    };
    let ended = broken && ended_within(&entry, Duration::from_secs(2)).await;
    let mut info = entry
        .lock()
        .map(|e| e.info.clone())
        .map_err(|_| ApiError::internal("process table poisoned"))?;
    if broken && !ended {
        // Killed but not yet reaped: it is not running for anyone who asks to use it.
        info.running = false;
    }
    Ok(info)
}

/// Waits until the process has ended (true), at most `limit`.
async fn ended_within(entry: &Mutex<Entry>, limit: Duration) -> bool {
    let step = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    loop {
        if !entry.lock().map(|e| e.info.running).unwrap_or(false) {
            return true;
        }
        if waited >= limit {
            return false;
        }
        tokio::time::sleep(step).await;
        waited += step;
    }
}

/// SIGTERM to the process group (continued, should it be frozen, so it can act on it), SIGKILL
/// to what is left of it two seconds later.
pub async fn kill(sandbox: &Sandbox, id: u64) -> Result<ProcessInfo> {
    let entry = sandbox.processes.get(id)?;
    let (pgid, running) = {
        let mut e = entry
            .lock()
            .map_err(|_| ApiError::internal("process table poisoned"))?;
        e.info.frozen = false;
        e.oom_saved = Default::default();
        (e.pgid, e.info.running)
    };
    if let (Some(pgid), true) = (pgid, running) {
        signal(pgid, libc::SIGTERM);
        signal(pgid, libc::SIGCONT);
        if !group::gone_within(pgid, STOP_GRACE).await {
            signal(pgid, libc::SIGKILL);
        }
        ended_within(&entry, Duration::from_secs(1)).await;
    }
    let info = entry
        .lock()
        .map(|e| e.info.clone())
        .map_err(|_| ApiError::internal("process table poisoned"))?;
    Ok(info)
}
