//! MCP methods: `initialize`, `ping`, `tools/list`, `tools/call`. Transport concerns (headers,
//! status codes, SSE) stay in `mcp::handle`; storage stays behind the ledger and the tools.

use super::jsonrpc::{self, RpcError};
use super::protocol;
use crate::error::{Error, ErrorKind};
use crate::ledger::api::{Ledger, OpenMcpSession};
use crate::principal::Principal;
use crate::tools::{self, CallError, Ctx};
use rmcp::model::{CallToolRequestParams, ErrorCode, InitializeRequestParams, RequestId};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use worker::Env;

/// Why a request produced no JSON-RPC response body of its own.
pub enum Failure {
    /// The MCP session is unknown, expired or ended: HTTP 404.
    SessionGone(RpcError),
    /// A JSON-RPC error to return with HTTP 200.
    Rpc(RpcError),
}

/// Handles `initialize`: negotiates the version and opens an MCP session.
/// Returns the response and the new session id.
pub async fn initialize(
    env: &Env,
    principal: &Principal,
    id: RequestId,
    params: Option<Map<String, Value>>,
) -> Result<(Value, String), RpcError> {
    let params: InitializeRequestParams = parse_params(&id, "initialize", params)?;
    let version = protocol::negotiate(params.protocol_version.as_str());
    let client = format!("{} {}", params.client_info.name, params.client_info.version);
    let session_id = Ledger::get(env)
        .map_err(|e| internal(&id, &e))?
        .call(OpenMcpSession {
            principal: principal.id.clone(),
            protocol_version: version.to_string(),
            client: Some(client),
        })
        .await
        .map_err(|e| internal(&id, &e))?
        .id;
    let result = serde_json::to_value(protocol::initialize_result(version))
        .map_err(|e| internal(&id, &Error::from(e)))?;
    Ok((jsonrpc::result(&id, result), session_id))
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
        "tools/list" => {
            check_session(ctx, &id).await?;
            Ok(jsonrpc::result(&id, tools::list_result()))
        }
        "tools/call" => call_tool(ctx, version, id, params).await,
        _ => {
            check_session(ctx, &id).await?;
            Err(Failure::Rpc(jsonrpc::method_not_found(id, method)))
        }
    }
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
                format!("unknown tool {name:?}; call tools/list for the available tools"),
            )));
        }
        Err(CallError::InvalidArguments(message)) => {
            check_session(ctx, &id).await?;
            if !protocol::argument_errors_are_tool_errors(version) {
                return Err(Failure::Rpc(jsonrpc::invalid_params(id, message)));
            }
            tools::invalid_arguments_result(&message)
        }
    };
    let value = serde_json::to_value(result).map_err(|e| Failure::Rpc(internal(&id, &e.into())))?;
    Ok(jsonrpc::result(&id, value))
}

/// Decodes `params`, naming the offending field on failure.
fn parse_params<T: DeserializeOwned>(
    id: &RequestId,
    method: &str,
    params: Option<Map<String, Value>>,
) -> Result<T, RpcError> {
    let value = Value::Object(params.unwrap_or_default());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." {
            format!("invalid params for {method}: {inner}")
        } else {
            format!("invalid params for {method}: `{path}`: {inner}")
        };
        jsonrpc::invalid_params(id.clone(), message)
    })
}

async fn check_session(ctx: &Ctx<'_>, id: &RequestId) -> Result<(), Failure> {
    match ctx.ledger.check_mcp_session().await {
        Ok(()) => Ok(()),
        Err(e) if e.kind == ErrorKind::McpSessionGone => Err(Failure::SessionGone(gone(id, &e))),
        Err(e) => Err(Failure::Rpc(internal(id, &e))),
    }
}

fn gone(id: &RequestId, e: &Error) -> RpcError {
    RpcError::new(
        Some(id.clone()),
        ErrorCode::INVALID_REQUEST,
        e.message.clone(),
    )
}

fn internal(id: &RequestId, e: &Error) -> RpcError {
    worker::console_error!("mcp: internal error: {}", e.message);
    RpcError::new(
        Some(id.clone()),
        ErrorCode::INTERNAL_ERROR,
        "internal error; retry the request",
    )
}
