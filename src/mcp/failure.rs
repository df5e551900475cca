//! How a request fails: the one mapping from handoff's errors to JSON-RPC errors (and the
//! HTTP 404 of a gone MCP session), shared by every MCP method.

use super::jsonrpc::{self, RpcError};
use crate::error::{Error, ErrorKind};
use rmcp::model::{ErrorCode, RequestId};

/// Why a request produced no JSON-RPC response body of its own.
pub enum Failure {
    /// The MCP session is unknown, expired or ended: HTTP 404.
    SessionGone(RpcError),
    /// A JSON-RPC error to return with HTTP 200.
    Rpc(RpcError),
}

/// A handoff error as a request's failure: a gone MCP session becomes HTTP 404, "not found" the
/// given code, invalid input -32602, anything else an internal error (logged, not shown).
pub fn failure_of(id: &RequestId, e: &Error, not_found: ErrorCode) -> Failure {
    match e.kind {
        ErrorKind::McpSessionGone => Failure::SessionGone(gone(id, e)),
        ErrorKind::NotFound => Failure::Rpc(RpcError::new(
            Some(id.clone()),
            not_found,
            e.message.clone(),
        )),
        ErrorKind::InvalidInput | ErrorKind::Conflict => {
            Failure::Rpc(jsonrpc::invalid_params(id.clone(), e.message.clone()))
        }
        _ => Failure::Rpc(internal(id, e)),
    }
}

pub fn gone(id: &RequestId, e: &Error) -> RpcError {
    RpcError::new(
        Some(id.clone()),
        ErrorCode::INVALID_REQUEST,
        e.message.clone(),
    )
}

pub fn internal(id: &RequestId, e: &Error) -> RpcError {
    worker::console_error!("mcp: internal error: {}", e.message);
    RpcError::new(
        Some(id.clone()),
        ErrorCode::INTERNAL_ERROR,
        "internal error; retry the request",
    )
}

/// A tool call that produced no result as the request's failure.
pub fn of_call(id: &RequestId, e: crate::tools::CallError) -> Failure {
    use crate::tools::CallError;
    match e {
        CallError::SessionGone(e) => Failure::SessionGone(gone(id, &e)),
        CallError::InvalidArguments(message) => {
            Failure::Rpc(jsonrpc::invalid_params(id.clone(), message))
        }
        CallError::UnknownTool(name) => Failure::Rpc(jsonrpc::invalid_params(
            id.clone(),
            crate::tools::unknown_tool_message(&name),
        )),
        CallError::Failed(e) => failure_of(id, &e, ErrorCode::INVALID_PARAMS),
    }
}
