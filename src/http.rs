//! Plain HTTP responses shared by the routes: JSON bodies, `/health`, the index, 404 and 500.

use crate::config;
use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::json;
use worker::{console_error, Env, Headers, Response, ResponseBuilder};

/// A JSON response with the given status.
pub fn json<T: Serialize>(status: u16, value: &T) -> Response {
    let body =
        serde_json::to_vec(value).unwrap_or_else(|_| br#"{"error":"internal_error"}"#.to_vec());
    let headers: Headers = [("content-type", "application/json")].iter().collect();
    ResponseBuilder::new()
        .with_status(status)
        .with_headers(headers)
        .fixed(body)
}

/// `GET /health`: unauthenticated liveness plus configuration warnings (names only).
pub fn health(env: &Env) -> Result<Response> {
    Ok(json(
        200,
        &json!({
            "status": "ok",
            "name": "handoff",
            "version": env!("CARGO_PKG_VERSION"),
            "warnings": config::warnings(env),
        }),
    ))
}

pub fn index() -> Result<Response> {
    Ok(Response::ok(
        "handoff — a remote MCP server for long coding tasks.\n\
         MCP endpoint: POST /mcp (Streamable HTTP, bearer token)\n\
         Health: GET /health\n",
    )?)
}

pub fn not_found(path: &str) -> Response {
    json(
        404,
        &json!({ "error": "not_found", "message": format!("no route for {path}; the MCP endpoint is /mcp") }),
    )
}

/// A 500 that reveals nothing internal; the details go to the log.
pub fn internal_error(error: &Error) -> Response {
    console_error!("unhandled error: {}", error.message);
    json(
        500,
        &json!({ "error": "internal_error", "message": "internal error; retry the request" }),
    )
}
