//! Reading a streamed exec (NDJSON `ExecEvent`s from the daemon) into the same `ExecResult` a
//! plain exec returns, reporting the latest output line as it arrives.

use crate::error::{Error, Result};
use futures::StreamExt;
use handoff_wire::{ExecEvent, ExecResult, HeadTail, EXEC_OUTPUT_CAP};
use worker::Response;

/// Reads the events to the end; `on_output` gets the last non-blank line of each chunk.
pub async fn collect(
    mut response: Response,
    mut on_output: impl FnMut(&str),
) -> Result<ExecResult> {
    let mut stream = response.stream()?;
    let mut pending: Vec<u8> = Vec::new();
    let mut out = HeadTail::new(EXEC_OUTPUT_CAP);
    let mut err = HeadTail::new(EXEC_OUTPUT_CAP);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            Error::unavailable(format!("the command's output stream broke off: {e}"))
        })?;
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event: ExecEvent = serde_json::from_slice(&line)
                .map_err(|e| Error::internal(format!("undecodable exec event: {e}")))?;
            let (buffer, data) = match event {
                ExecEvent::Stdout { data } => (&mut out, data),
                ExecEvent::Stderr { data } => (&mut err, data),
                ExecEvent::Exit {
                    exit_code,
                    duration_ms,
                    timed_out,
                } => {
                    let truncated = out.truncated() || err.truncated();
                    return Ok(ExecResult {
                        stdout: out.finish(),
                        stderr: err.finish(),
                        exit_code,
                        duration_ms,
                        truncated,
                        timed_out,
                    });
                }
            };
            buffer.push(data.as_bytes());
            if let Some(last) = data.lines().rev().find(|l| !l.trim().is_empty()) {
                on_output(last);
            }
        }
    }
    Err(Error::unavailable(
        "the command's output ended without an exit status (the sandbox daemon may have \
         restarted); check the sandbox with sandbox_info and run the command again",
    ))
}
