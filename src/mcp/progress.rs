//! Progress on slow requests. When a client that accepts `text/event-stream` puts a
//! `progressToken` in a request's `_meta` and the request is still running after
//! [`PROGRESS_EVERY`], the answer becomes an SSE stream: `notifications/progress` every
//! [`PROGRESS_EVERY`] (progress = seconds elapsed, strictly increasing; the message carries the
//! tool's status line, e.g. a command's latest output), then the response.
//! Faster requests are answered as usual, so only long ones (a long `sandbox_exec`) stream.
//! Without a token (a `tasks/result` that blocks until its run ends) the stream carries SSE
//! comments instead, which keep the connection alive. Every event has an id, unique to the
//! stream (`p<stream>-<n>`).

use super::failure::Failure;
use crate::error::Result;
use crate::tools::StatusLine;
use futures::future::{select, Either, LocalBoxFuture};
use futures::StreamExt;
use serde_json::{json, Map, Value};
use std::time::Duration;
use worker::{Delay, Response};

/// How long a request runs before the first progress notification, and between notifications.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(3);

/// What a request's handling ends with.
pub type Outcome = std::result::Result<Value, Failure>;

/// The request's `_meta.progressToken` (a string or an integer), if it sent one.
pub fn token(params: Option<&Map<String, Value>>) -> Option<Value> {
    let token = params?.get("_meta")?.get("progressToken")?;
    (token.is_string() || token.is_i64() || token.is_u64()).then(|| token.clone())
}

/// Either the finished outcome (the request took less than [`PROGRESS_EVERY`]) or an SSE
/// response that reports progress until the outcome is ready.
pub async fn run(
    pending: LocalBoxFuture<'static, Outcome>,
    token: Option<Value>,
    status: StatusLine,
) -> Result<Finished> {
    let pending = match select(pending, Box::pin(Delay::from(PROGRESS_EVERY))).await {
        Either::Left((outcome, _)) => return Ok(Finished::Quickly(outcome)),
        Either::Right((_, pending)) => pending,
    };
    let ticker = Ticker {
        stream_id: crate::ids::new_id("p"),
        token,
        status,
    };
    let first = ticker.tick(1);
    let state = Some((pending, 1u64));
    let rest = futures::stream::unfold(state, move |state| {
        let ticker = ticker.clone();
        async move {
            let (pending, ticks) = state?;
            match select(pending, Box::pin(Delay::from(PROGRESS_EVERY))).await {
                Either::Left((outcome, _)) => Some((ticker.last(outcome), None)),
                Either::Right((_, pending)) => {
                    let ticks = ticks + 1;
                    Some((ticker.tick(ticks), Some((pending, ticks))))
                }
            }
        }
    });
    let stream = futures::stream::once(async move { first })
        .chain(rest)
        .map(Ok::<Vec<u8>, worker::Error>);
    let mut response = Response::from_stream(stream)?;
    response
        .headers_mut()
        .set("content-type", "text/event-stream")?;
    response.headers_mut().set("cache-control", "no-cache")?;
    Ok(Finished::Streaming(response))
}

/// What a progress stream sends between the start and the answer.
#[derive(Clone)]
struct Ticker {
    stream_id: String,
    token: Option<Value>,
    status: StatusLine,
}

impl Ticker {
    fn tick(&self, ticks: u64) -> Vec<u8> {
        match &self.token {
            Some(token) => notification(
                &format!("{}-{ticks}", self.stream_id),
                token,
                ticks,
                &self.status.borrow(),
            ),
            None => format!(
                ": still working ({} s)\n\n",
                ticks * PROGRESS_EVERY.as_secs()
            )
            .into_bytes(),
        }
    }

    fn last(&self, outcome: Outcome) -> Vec<u8> {
        let id = format!("{}-end", self.stream_id);
        crate::http::sse_event_with_id(&id, &final_message(outcome))
    }
}

/// How a request with a progress token was answered.
pub enum Finished {
    Quickly(Outcome),
    Streaming(Response),
}

/// Longest status line a notification carries.
const STATUS_CHARS: usize = 200;

fn notification(event_id: &str, token: &Value, ticks: u64, status: &str) -> Vec<u8> {
    let seconds = ticks * PROGRESS_EVERY.as_secs();
    let status: String = status.trim().chars().take(STATUS_CHARS).collect();
    let message = if status.is_empty() {
        format!("still working ({seconds} s)")
    } else {
        format!("still working ({seconds} s): {status}")
    };
    crate::http::sse_event_with_id(
        event_id,
        &json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": seconds,
                "message": message,
            },
        }),
    )
}

/// The response that ends the stream; errors travel as JSON-RPC errors since the HTTP status
/// was sent with the first notification.
fn final_message(outcome: Outcome) -> Value {
    match outcome {
        Ok(value) => value,
        Err(Failure::Rpc(e)) | Err(Failure::SessionGone(e)) => e.to_json(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_string_or_integer_tokens_count() {
        let params = |meta: Value| {
            json!({"name": "x", "_meta": meta})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            token(Some(&params(json!({"progressToken": "p1"})))),
            Some(json!("p1"))
        );
        assert_eq!(
            token(Some(&params(json!({"progressToken": 7})))),
            Some(json!(7))
        );
        assert_eq!(token(Some(&params(json!({"progressToken": 1.5})))), None);
        assert_eq!(token(Some(&params(json!({})))), None);
        assert_eq!(token(None), None);
    }

    #[test]
    fn notifications_count_seconds() {
        let text = String::from_utf8(notification("p1-2", &json!("t"), 2, " line 3\n"))
            .unwrap_or_default();
        assert!(
            text.contains(r#""message":"still working (6 s): line 3""#),
            "{text}"
        );
        assert!(text.starts_with("id: p1-2\nevent: message\ndata: "));
        assert!(text.contains(r#""progress":6"#), "{text}");
        assert!(text.contains(r#""progressToken":"t""#), "{text}");
        assert!(text.ends_with("\n\n"));
    }
}
