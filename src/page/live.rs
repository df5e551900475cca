//! `GET /runs/<runId>/events`: the run page's live parts as server-sent events. The stream reads
//! the ledger once a second and sends an `update` event — the parts' HTML by element id — when
//! the run changed; it ends when the run has ended (the page then reloads for the answer and
//! the diff) or after [`LIFETIME`] (the browser reconnects by itself).

use super::parts;
use crate::error::Result;
use crate::ledger::api::{GetRun, Ledger};
use crate::runs::RunRecord;
use crate::time::now_ms;
use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use worker::{Delay, Env, Response};

const POLL: Duration = Duration::from_secs(1);
const LIFETIME_MS: i64 = 5 * 60 * 1000;
/// A comment after this many quiet reads keeps proxies from closing the stream.
const KEEP_ALIVE_POLLS: u32 = 15;

struct State {
    ledger: Ledger,
    run_id: String,
    seen: Option<(i64, String)>,
    started: i64,
    quiet: u32,
    over: bool,
}

pub fn events(env: &Env, run_id: &str) -> Result<Response> {
    let state = State {
        ledger: Ledger::get(env)?,
        run_id: run_id.to_string(),
        seen: None,
        started: now_ms(),
        quiet: 0,
        over: false,
    };
    let first = futures::stream::once(async { b"retry: 3000\n\n".to_vec() });
    let updates = futures::stream::unfold(state, |mut state| async move {
        loop {
            if state.over || now_ms() - state.started > LIFETIME_MS {
                return None;
            }
            let get = GetRun {
                run_id: state.run_id.clone(),
            };
            let Ok(run) = state.ledger.call(get).await else {
                return None;
            };
            let key = (run.updated_at, run.status.as_str().to_string());
            if state.seen.as_ref() != Some(&key) {
                state.seen = Some(key);
                state.quiet = 0;
                state.over = run.status.is_terminal();
                return Some((update(&run), state));
            }
            state.quiet += 1;
            if state.quiet >= KEEP_ALIVE_POLLS {
                state.quiet = 0;
                return Some((b": keep-alive\n\n".to_vec(), state));
            }
            Delay::from(POLL).await;
        }
    });
    let body = first.chain(updates).map(Ok::<Vec<u8>, worker::Error>);
    let mut response = Response::from_stream(body)?;
    let headers = response.headers_mut();
    headers.set("content-type", "text/event-stream")?;
    headers.set("cache-control", "no-store")?;
    headers.set("x-content-type-options", "nosniff")?;
    Ok(response)
}

/// One `update` event: the live parts of `run` and whether it has ended.
fn update(run: &RunRecord) -> Vec<u8> {
    let now = now_ms();
    let detail = run.progress.as_ref().and_then(|p| p.detail.clone());
    let (steps, total) = detail.map(|d| (d.recent, d.steps)).unwrap_or_default();
    let data = json!({
        "ended": run.status.is_terminal(),
        "parts": {
            parts::HEAD: parts::head(run, now).into_string(),
            parts::TIMELINE: parts::timeline(run, &steps, total, now).into_string(),
            parts::USAGE: parts::usage(run, now).into_string(),
        }
    });
    format!("event: update\ndata: {data}\n\n").into_bytes()
}
