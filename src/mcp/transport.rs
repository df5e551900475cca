//! HTTP framing of the MCP endpoint: content negotiation, JSON or SSE bodies, error
//! responses, the 401 challenge and CORS headers.

use super::jsonrpc::{self, RpcError};
use crate::auth::AuthError;
use crate::error::Result;
use crate::http;
use serde_json::Value;
use worker::{Headers, Response};

/// How the client wants responses to requests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Json,
    Sse,
}

/// JSON unless the client accepts only SSE; `None` when it accepts neither.
pub fn response_mode(accept: Option<&str>) -> Option<Mode> {
    let Some(accept) = accept else {
        return Some(Mode::Json);
    };
    let has = |t: &str| accepts(Some(accept), t);
    if has("application/json") || has("application/*") || has("*/*") {
        Some(Mode::Json)
    } else if has("text/event-stream") {
        Some(Mode::Sse)
    } else {
        None
    }
}

/// Whether an `Accept` header names `media_type` exactly (parameters ignored).
pub fn accepts(accept: Option<&str>, media_type: &str) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case(media_type)
        })
    })
}

pub fn respond(mode: Mode, value: &Value) -> Result<Response> {
    match mode {
        Mode::Json => Ok(http::json(200, value)),
        Mode::Sse => respond_encoded(mode, &value.to_string()),
    }
}

/// [`respond`] for a message already encoded as JSON.
pub fn respond_encoded(mode: Mode, message: &str) -> Result<Response> {
    let (body, content_type) = match mode {
        Mode::Json => (message.as_bytes().to_vec(), "application/json"),
        Mode::Sse => (http::sse_event(&message), "text/event-stream"),
    };
    let mut response = Response::from_bytes(body)?;
    response.headers_mut().set("content-type", content_type)?;
    if mode == Mode::Sse {
        response.headers_mut().set("cache-control", "no-cache")?;
    }
    Ok(response)
}

pub fn error_response(status: u16, error: &RpcError) -> Response {
    http::json(status, &error.to_json())
}

pub fn unauthorized(error: &AuthError, base: &str) -> Response {
    let status = match error {
        AuthError::NotConfigured | AuthError::Unavailable => 503,
        AuthError::Missing | AuthError::Invalid => 401,
    };
    let mut response = error_response(status, &jsonrpc::invalid_request(None, error.message()));
    if status == 401 {
        let _ = response
            .headers_mut()
            .set("www-authenticate", &error.challenge(base));
    }
    response
}

pub fn with_cors(mut response: Response, origin: Option<&str>) -> Response {
    if let Some(origin) = origin {
        let headers = response.headers_mut();
        let _ = headers.set("access-control-allow-origin", origin);
        let _ = headers.set("vary", "Origin");
        let _ = headers.set("access-control-allow-methods", "GET, POST, DELETE, OPTIONS");
        let _ = headers.set(
            "access-control-allow-headers",
            "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, mcp-method, mcp-name, last-event-id",
        );
        let _ = headers.set(
            "access-control-expose-headers",
            "mcp-session-id, www-authenticate",
        );
    }
    response
}

pub fn header(headers: &Headers, name: &str) -> Option<String> {
    headers
        .get(name)
        .ok()
        .flatten()
        .filter(|v| !v.trim().is_empty())
}
