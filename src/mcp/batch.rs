//! JSON-RPC batches, which MCP 2025-03-26 (and no later version) requires a server to take: the
//! messages of one POST are handled at once and their responses go back together, in request
//! order, as one JSON array (or one SSE event holding it). Progress is not streamed for a
//! batched request; `initialize` may not be batched (the spec says so).

use super::failure::Failure;
use super::jsonrpc::{self, Message};
use super::server;
use super::task_view::Era;
use super::transport::{error_response, respond_encoded, Mode};
use crate::error::Result;
use crate::ledger::api::Ledger;
use crate::principal::Principal;
use crate::tools::Ctx;
use serde_json::Value;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use worker::{Env, Response};

/// The one version with batches.
pub const VERSION: &str = "2025-03-26";
/// The most messages one batch may hold: each is a call of its own, all run at once.
pub const MAX_MESSAGES: usize = 32;

/// Why a batch is refused as a whole, before any of it runs: its HTTP status and error.
pub fn refused(version: &str, items: &[Value]) -> Option<(u16, jsonrpc::RpcError)> {
    let known =
        super::protocol::is_supported(version) || super::modern::VERSIONS.contains(&version);
    let message = if !known {
        format!(
            "unsupported MCP-Protocol-Version {version:?}; JSON-RPC batches are part of MCP \
             {VERSION} only: send that version, or one JSON-RPC message per POST"
        )
    } else if version != VERSION {
        format!(
            "JSON-RPC batches are part of MCP {VERSION} only (2025-06-18 removed them); this \
             request speaks {version}: send one JSON-RPC message per POST"
        )
    } else if items.is_empty() {
        "an empty batch: send at least one JSON-RPC message".to_string()
    } else if items.len() > MAX_MESSAGES {
        format!(
            "a batch may hold at most {MAX_MESSAGES} messages (this one holds {}): send the rest \
             in another POST",
            items.len()
        )
    } else if items
        .iter()
        .any(|item| item.get("method").and_then(Value::as_str) == Some("initialize"))
    {
        "initialize must not be part of a JSON-RPC batch: send it on its own first".to_string()
    } else {
        return None;
    };
    Some((400, jsonrpc::invalid_request(None, message)))
}

/// Handles a batch that [`refused`] let through, for the session `ledger` is bound to.
pub async fn post(
    env: &Env,
    principal: Principal,
    ledger: Ledger,
    base_url: String,
    mode: Mode,
    items: Vec<Value>,
) -> Result<Response> {
    let ctx = Ctx {
        env,
        principal,
        ledger,
        base_url,
        status: None,
        task_ttl_ms: None,
    };
    let answers = all(items.into_iter().map(|item| answer(&ctx, item)).collect()).await;
    let mut parts = Vec::new();
    for answer in answers {
        match answer {
            Answer::Encoded(text) => parts.push(text),
            Answer::Gone(e) => return Ok(error_response(404, &e)),
            Answer::Nothing => {}
        }
    }
    if parts.is_empty() {
        // Only notifications and responses: like one of them on its own, 202 once the session
        // is known to be there.
        return Ok(match ctx.ledger.check_mcp_session().await {
            Ok(()) => Response::empty()?.with_status(202),
            Err(e) => error_response(404, &jsonrpc::invalid_request(None, e.message)),
        });
    }
    respond_encoded(mode, &format!("[{}]", parts.join(",")))
}

/// One message's part of the batch's answer.
enum Answer {
    /// Its response, encoded.
    Encoded(String),
    /// The session is gone: the whole batch answers 404.
    Gone(jsonrpc::RpcError),
    /// A notification or a response: no answer.
    Nothing,
}

async fn answer(ctx: &Ctx<'_>, item: Value) -> Answer {
    let (id, method, params) = match jsonrpc::classify(item) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        Ok(Message::Notification | Message::Response) => return Answer::Nothing,
        Err(e) => return Answer::Encoded(e.to_json().to_string()),
    };
    let outcome = if method == "tools/list" {
        server::tools_list(&ctx.ledger, &id, Era::Legacy, params.as_ref()).await
    } else {
        server::dispatch(ctx, VERSION, id, &method, params)
            .await
            .map(|value| value.to_string())
    };
    match outcome {
        Ok(encoded) => Answer::Encoded(encoded),
        Err(Failure::SessionGone(e)) => Answer::Gone(e),
        Err(Failure::Rpc(e)) => Answer::Encoded(e.to_json().to_string()),
    }
}

/// Every future's output, in order, the futures run at once. `futures::future::join_all` does
/// the same but brings its `FuturesUnordered` machinery into the bundle for more than 30; a
/// batch is at most [`MAX_MESSAGES`], so each wake-up polls those not done yet.
async fn all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut waiting = false;
        for (future, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use futures::future::{BoxFuture, FutureExt};

    #[test]
    fn all_runs_the_futures_at_once_and_keeps_their_order() {
        let (tx, rx) = oneshot::channel::<u32>();
        // The first waits for the second: run one after the other they would never end.
        let first: BoxFuture<'static, u32> = async move { rx.await.unwrap_or(0) + 1 }.boxed();
        let second: BoxFuture<'static, u32> = async move {
            tx.send(41).ok();
            7
        }
        .boxed();
        let third: BoxFuture<'static, u32> = async { 3 }.boxed();
        let outputs = futures::executor::block_on(all(vec![first, second, third]));
        assert_eq!(outputs, [42, 7, 3]);
        assert!(futures::executor::block_on(all(Vec::<BoxFuture<'static, u32>>::new())).is_empty());
    }
}
