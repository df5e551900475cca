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
use futures::future::join_all;
use serde_json::Value;
use worker::{Env, Response};

/// The one version with batches.
pub const VERSION: &str = "2025-03-26";
/// The most messages one batch may hold: each is a call of its own, all run at once.
pub const MAX_MESSAGES: usize = 32;

/// Why a batch is refused as a whole, before any of it runs: its HTTP status and error.
pub fn refused(version: &str, items: &[Value]) -> Option<(u16, jsonrpc::RpcError)> {
    let message = if version != VERSION {
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
    let answers = join_all(items.into_iter().map(|item| answer(&ctx, item))).await;
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
