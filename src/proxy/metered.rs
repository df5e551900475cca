//! Budgets at the proxy: a model call passes only while its run is within budget, and every
//! answer is read on its way back for the provider's own token count, which is added to the
//! run in the ledger when the answer ends.

use crate::budget::Meter;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::{Ledger, RecordUsage};
use crate::runs::RunRecord;
use crate::time::now_ms;
use futures::StreamExt;
use worker::{console_error, Env, Method, Response};

/// Refuses a model call of a run that has reached its budget (403, which agents do not retry).
pub fn within_budget(run: &RunRecord) -> Result<()> {
    match run.over_budget(now_ms()) {
        Some(over) => Err(Error::new(
            ErrorKind::Forbidden,
            format!("budget_exceeded: {}", over.message()),
        )),
        None => Ok(()),
    }
}

/// The upstream's answer, passed through unchanged while its usage is counted; the count goes
/// to the ledger once the answer has ended. Only successful calls that can use tokens are
/// read.
pub fn metered(
    env: &Env,
    method: &Method,
    run_id: &str,
    mut response: Response,
) -> Result<Response> {
    let status = response.status_code();
    if *method != Method::Post || !(200..300).contains(&status) {
        return Ok(response);
    }
    let headers = response.headers().clone();
    // The body is read (and so decoded) here; the runtime encodes it again as it leaves.
    headers.delete("content-length")?;
    let content_type = headers
        .get("content-type")
        .ok()
        .flatten()
        .unwrap_or_default();
    let upstream = response.stream()?;
    let tally = Tally {
        meter: Some(Meter::new(&content_type)),
        ledger: Some(Ledger::get(env)?),
        run_id: run_id.to_string(),
    };
    let body = futures::stream::unfold((upstream, tally), |(mut upstream, mut tally)| async move {
        match upstream.next().await {
            Some(Ok(chunk)) => {
                if let Some(meter) = tally.meter.as_mut() {
                    meter.feed(&chunk);
                }
                Some((Ok(chunk), (upstream, tally)))
            }
            Some(Err(e)) => Some((Err(e), (upstream, tally))),
            None => {
                tally.settle().await;
                None
            }
        }
    });
    Ok(Response::from_stream(body)?
        .with_status(status)
        .with_headers(headers))
}

/// Largest chat completion request the proxy reads to ask for usage.
pub const MAX_CHAT_REQUEST: usize = 32 * 1024 * 1024;

/// A chat completion request that streams, made to report its usage at the end
/// (`stream_options.include_usage`), so a caller cannot leave it out and go uncounted. Other
/// bodies pass as they are; a body that is not JSON is refused.
pub fn with_usage(body: &[u8]) -> Result<String> {
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Error::invalid(format!("the chat completion request is not JSON: {e}")))?;
    if let Some(request) = value.as_object_mut() {
        if request.get("stream") == Some(&serde_json::Value::Bool(true)) {
            let options = request
                .entry("stream_options")
                .or_insert_with(|| serde_json::json!({}));
            match options.as_object_mut() {
                Some(options) => {
                    options.insert("include_usage".into(), serde_json::Value::Bool(true));
                }
                None => *options = serde_json::json!({"include_usage": true}),
            }
        }
    }
    Ok(value.to_string())
}

/// What one answer used so far, recorded once: when the answer ends, or — when the caller
/// drops it before the end — with what was seen by then (Anthropic reports the input at the
/// start), so cutting an answer short does not hide it.
struct Tally {
    meter: Option<Meter>,
    ledger: Option<Ledger>,
    run_id: String,
}

impl Tally {
    async fn settle(&mut self) {
        if let (Some(meter), Some(ledger)) = (self.meter.take(), self.ledger.take()) {
            record(ledger, self.run_id.clone(), meter.finish().total()).await;
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let (Some(meter), Some(ledger)) = (self.meter.take(), self.ledger.take()) {
            let tokens = meter.finish().total();
            let run_id = std::mem::take(&mut self.run_id);
            worker::wasm_bindgen_futures::spawn_local(record(ledger, run_id, tokens));
        }
    }
}

async fn record(ledger: Ledger, run_id: String, tokens: u64) {
    let op = RecordUsage {
        run_id: run_id.clone(),
        tokens,
    };
    if let Err(e) = ledger.call(op).await {
        console_error!("proxy: recording {tokens} tokens of {run_id}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chat_completions_always_ask_for_usage() {
        let asked =
            with_usage(br#"{"model":"m","stream":true,"stream_options":{"include_usage":false}}"#)
                .unwrap();
        assert!(asked.contains(r#""include_usage":true"#), "{asked}");
        let bare = with_usage(br#"{"model":"m","stream":true}"#).unwrap();
        assert!(
            bare.contains(r#""stream_options":{"include_usage":true}"#),
            "{bare}"
        );
        let odd = with_usage(br#"{"stream":true,"stream_options":7}"#).unwrap();
        assert!(odd.contains(r#""include_usage":true"#), "{odd}");
        let whole = with_usage(br#"{"model":"m"}"#).unwrap();
        assert!(!whole.contains("stream_options"), "{whole}");
        assert!(with_usage(b"not json").is_err());
    }
}
