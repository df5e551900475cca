//! `GET /runs/<runId>/events`: the run page's live parts as server-sent events. The stream waits
//! in the ledger for the run to be written (`await_run`) and sends an `update` event — the parts'
//! HTML by element id — as soon as it changed (at most every [`MIN_GAP_MS`]), or a keep-alive
//! comment when [`QUIET_MS`] passed without a change; it ends when the run has ended (the page
//! then reloads for the answer and the diff) or after [`LIFETIME_MS`] (the browser reconnects
//! by itself).

use super::parts;
use crate::error::Result;
use crate::ledger::api::{AwaitRun, Ledger, MAX_AWAIT_MS};
use crate::runs::RunRecord;
use crate::time::now_ms;
use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use worker::{Delay, Env, Response};

const LIFETIME_MS: i64 = 5 * 60 * 1000;
/// A comment after this long without a change keeps proxies from closing the stream.
const QUIET_MS: u32 = MAX_AWAIT_MS;
/// Updates come at most this often: a burst of writes is rendered once, with its last state.
const MIN_GAP_MS: i64 = 500;

struct State {
    ledger: Ledger,
    run_id: String,
    seen: Option<(i64, String)>,
    /// When the last update was sent.
    sent_at: i64,
    started: i64,
    over: bool,
}

pub fn events(env: &Env, run_id: &str) -> Result<Response> {
    let state = State {
        ledger: Ledger::get(env)?,
        run_id: run_id.to_string(),
        seen: None,
        sent_at: 0,
        started: now_ms(),
        over: false,
    };
    let first = futures::stream::once(async { b"retry: 3000\n\n".to_vec() });
    let updates = futures::stream::unfold(state, |mut state| async move {
        if state.over || now_ms() - state.started > LIFETIME_MS {
            return None;
        }
        let since = now_ms() - state.sent_at;
        if since < MIN_GAP_MS {
            Delay::from(Duration::from_millis((MIN_GAP_MS - since) as u64)).await;
        }
        // The first call answers at once (nothing seen yet).
        let wait = AwaitRun {
            run_id: state.run_id.clone(),
            after: state.seen.as_ref().map_or(i64::MIN, |(at, _)| *at),
            wait_ms: QUIET_MS,
            until_terminal: false,
        };
        let Ok(run) = state.ledger.call(wait).await else {
            return None;
        };
        let key = (run.updated_at, run.status.as_str().to_string());
        if state.seen.as_ref() == Some(&key) {
            return Some((b": keep-alive\n\n".to_vec(), state));
        }
        state.seen = Some(key);
        state.sent_at = now_ms();
        state.over = run.status.is_terminal();
        Some((update(&run), state))
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
