//! MCP methods: `initialize`, `ping`, tools, tasks (`tasks.rs`), resources (`resources.rs`),
//! prompts and completions (`prompts.rs`). Transport concerns (headers,
//! status codes, SSE) stay in `mcp::handle`; storage stays behind the ledger and the tools.

use super::failure::{gone, internal, Failure};
use super::jsonrpc::{self, RpcError};
use super::protocol;
use super::task_view::Era;
use super::tasks;
use super::{prompts, resources};
use crate::error::{Error, ErrorKind};
use crate::ledger::api::Ledger;
use crate::principal::Principal;
use crate::tools::{self, CallError, Ctx};
use rmcp::model::{CallToolRequestParams, InitializeRequestParams, RequestId};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use worker::Env;

/// Handles `initialize`: negotiates the version and opens an MCP session (see
/// `mcp_session_ids`).
/// Returns the response, encoded, and the new session id.
pub async fn initialize(
    env: &Env,
    principal: &Principal,
    id: RequestId,
    params: Option<Map<String, Value>>,
) -> Result<(String, String), RpcError> {
    let params: InitializeRequestParams = parse_params(&id, "initialize", params)?;
    let version = protocol::negotiate(params.protocol_version.as_str());
    // With a signing key the session id is signed and the ledger records it at its first
    // request that reaches it, so `initialize` makes no round trip; without one the ledger
    // opens it now.
    let session_id = match crate::config::signing_key(env) {
        Some(key) => Ledger::issue_signed_mcp_session(&key, &principal.id, version),
        None => {
            let client = format!("{} {}", params.client_info.name, params.client_info.version);
            Ledger::get(env)
                .map_err(|e| internal(&id, &e))?
                .open_mcp_session(&principal.id, version, Some(client))
                .await
                .map_err(|e| internal(&id, &e))?
        }
    };
    Ok((
        encoded_reply(&id, &INITIALIZED, version, || initialized(version))?,
        session_id,
    ))
}

/// `initialize`'s result for `version`, fixed for a deploy.
fn initialized(version: &'static str) -> Value {
    let mut result = serde_json::to_value(protocol::initialize_result(version)).unwrap_or_default();
    if version == protocol::TASKS_VERSION {
        result["capabilities"]["tasks"] = protocol::legacy_tasks_capability();
    }
    result
}

thread_local! {
    /// `initialize`'s results, encoded once per isolate and protocol version.
    static INITIALIZED: Encoded = Encoded::default();
    /// `tools/list`'s results, encoded once per isolate and era.
    static TOOLS_LISTED: Encoded = Encoded::default();
}

/// Results fixed for a deploy, encoded once each (by key) and answered with the request's id.
type Encoded = std::cell::RefCell<std::collections::HashMap<&'static str, std::rc::Rc<str>>>;

/// The JSON-RPC response `{jsonrpc, id, result}` with `result` from the `cache` (`make` fills
/// it the first time `key` is asked for).
fn encoded_reply(
    id: &RequestId,
    cache: &'static std::thread::LocalKey<Encoded>,
    key: &'static str,
    make: impl FnOnce() -> Value,
) -> Result<String, RpcError> {
    let result = cache.with(|cache| {
        let known = cache.borrow().get(key).cloned();
        known.unwrap_or_else(|| {
            let encoded: std::rc::Rc<str> = make().to_string().into();
            cache.borrow_mut().insert(key, encoded.clone());
            encoded
        })
    });
    jsonrpc::encoded_result(id, &result).map_err(|e| internal(id, &Error::from(e)))
}

/// Handles every request after `initialize`.
pub async fn dispatch(
    ctx: &Ctx<'_>,
    version: &str,
    id: RequestId,
    method: &str,
    params: Option<Map<String, Value>>,
) -> Result<Value, Failure> {
    match method {
        "ping" => {
            check_session(ctx, &id).await?;
            Ok(jsonrpc::result(&id, json!({})))
        }
        "tools/call" if ctx.task_ttl_ms.is_some() => {
            let params: CallToolRequestParams =
                parse_params(&id, "tools/call", params).map_err(Failure::Rpc)?;
            let era = tasks_era(version);
            tasks::create(ctx, era, &id, &params.name, params.arguments).await
        }
        "tools/call" => call_tool(ctx, version, id, params).await,
        "tasks/get" if has_tasks(version) => {
            tasks::get(ctx, tasks_era(version), &id, params.as_ref()).await
        }
        "tasks/cancel" if has_tasks(version) => {
            tasks::cancel(ctx, tasks_era(version), &id, params.as_ref()).await
        }
        "tasks/result" if version == protocol::TASKS_VERSION => {
            tasks::result(ctx, &id, params.as_ref()).await
        }
        "tasks/list" if version == protocol::TASKS_VERSION => {
            tasks::list(ctx, &id, params.as_ref()).await
        }
        "tasks/update" if tasks_era(version) == Era::Modern => {
            tasks::update(ctx, &id, params.as_ref()).await
        }
        "resources/list" => resources::list(ctx, &id, params.as_ref()).await,
        "resources/templates/list" => {
            check_session(ctx, &id).await?;
            jsonrpc::no_cursor(&id, params.as_ref()).map_err(Failure::Rpc)?;
            Ok(jsonrpc::result(&id, resources::templates()))
        }
        "resources/read" => {
            let legacy = tasks_era(version) == Era::Legacy;
            resources::read(ctx, legacy, &id, params.as_ref()).await
        }
        "resources/subscribe" | "resources/unsubscribe" if tasks_era(version) == Era::Legacy => {
            let on = method == "resources/subscribe";
            resources::subscribe(ctx, &id, params.as_ref(), on).await
        }
        "prompts/list" => {
            check_session(ctx, &id).await?;
            jsonrpc::no_cursor(&id, params.as_ref()).map_err(Failure::Rpc)?;
            Ok(jsonrpc::result(&id, prompts::list()))
        }
        "prompts/get" => prompts::get(ctx, &id, params.as_ref()).await,
        "completion/complete" => prompts::complete(ctx, &id, params.as_ref()).await,
        _ => {
            check_session(ctx, &id).await?;
            Err(Failure::Rpc(jsonrpc::method_not_found(id, method, version)))
        }
    }
}

/// `tools/list`'s answer, already encoded (`mcp::post` sends it as it is): the catalog is fixed
/// for a deploy, so its result is encoded once per isolate and era, not cloned and encoded on
/// every call (2–3 ms of CPU each, `bench profile tools`). The initialize era checks the session
/// first, as every method does; the list has one page, so a cursor is refused.
pub async fn tools_list(
    ledger: &Ledger,
    id: &RequestId,
    era: Era,
    params: Option<&Map<String, Value>>,
) -> Result<String, Failure> {
    if era == Era::Legacy {
        session_checked(ledger, id).await?;
    }
    jsonrpc::no_cursor(id, params).map_err(Failure::Rpc)?;
    let key = match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    };
    encoded_reply(id, &TOOLS_LISTED, key, || {
        let response = jsonrpc::result(&RequestId::Number(0), tools::list_result());
        let mut response = match era {
            Era::Modern => super::modern::decorate("tools/list", response),
            Era::Legacy => response,
        };
        response["result"].take()
    })
    .map_err(Failure::Rpc)
}

async fn call_tool(
    ctx: &Ctx<'_>,
    version: &str,
    id: RequestId,
    params: Option<Map<String, Value>>,
) -> Result<Value, Failure> {
    let params: CallToolRequestParams = match parse_params(&id, "tools/call", params) {
        Ok(p) => p,
        Err(e) => {
            check_session(ctx, &id).await?;
            return Err(Failure::Rpc(e));
        }
    };
    let outcome = tools::call(ctx, &params.name, params.arguments).await;
    let result = match outcome {
        Ok(result) => result,
        Err(CallError::SessionGone(e)) => return Err(Failure::SessionGone(gone(&id, &e))),
        Err(CallError::UnknownTool(name)) => {
            check_session(ctx, &id).await?;
            return Err(Failure::Rpc(jsonrpc::invalid_params(
                id,
                crate::tools::unknown_tool_message(&name),
            )));
        }
        Err(CallError::InvalidArguments(message)) => {
            check_session(ctx, &id).await?;
            if !protocol::argument_errors_are_tool_errors(version) {
                return Err(Failure::Rpc(jsonrpc::invalid_params(id, message)));
            }
            tools::invalid_arguments_result(&message)
        }
        Err(e @ CallError::Failed(_)) => return Err(super::failure::of_call(&id, e)),
    };
    let value = serde_json::to_value(result).map_err(|e| Failure::Rpc(internal(&id, &e.into())))?;
    Ok(jsonrpc::result(&id, value))
}

/// Whether `version` has tasks (2025-11-25 in the core, 2026-07-28 as the extension, whose
/// declaration `mcp::post_modern` checks).
fn has_tasks(version: &str) -> bool {
    version == protocol::TASKS_VERSION || tasks_era(version) == Era::Modern
}

fn tasks_era(version: &str) -> Era {
    if protocol::is_supported(version) {
        Era::Legacy
    } else {
        Era::Modern
    }
}

/// Decodes `params`, naming the offending field on failure.
fn parse_params<T: DeserializeOwned>(
    id: &RequestId,
    method: &str,
    params: Option<Map<String, Value>>,
) -> Result<T, RpcError> {
    crate::json_path::decode(params.unwrap_or_default()).map_err(|e| {
        let (path, inner) = (e.path, e.message);
        let message = if path == "." {
            format!("invalid params for {method}: {inner}")
        } else {
            format!("invalid params for {method}: `{path}`: {inner}")
        };
        jsonrpc::invalid_params(id.clone(), message)
    })
}

async fn check_session(ctx: &Ctx<'_>, id: &RequestId) -> Result<(), Failure> {
    session_checked(&ctx.ledger, id).await
}

async fn session_checked(ledger: &Ledger, id: &RequestId) -> Result<(), Failure> {
    match ledger.check_mcp_session().await {
        Ok(()) => Ok(()),
        Err(e) if e.kind == ErrorKind::McpSessionGone => Err(Failure::SessionGone(gone(id, &e))),
        Err(e) => Err(Failure::Rpc(internal(id, &e))),
    }
}
