//! The MCP endpoint `/mcp` over Streamable HTTP: Origin and auth checks, body cap, session and
//! protocol-version headers, JSON or SSE responses. Both eras are served here, chosen per
//! request: the initialize era (sessions) and 2026-07-28 (`modern`, stateless). Methods are
//! handled in `server`.

mod jsonrpc;
mod modern;
mod progress;
mod protocol;
mod server;

use crate::auth::{self, AuthError};
use crate::config;
use crate::error::Result;
use crate::http;
use crate::ids;
use crate::ledger::api::{CloseMcpSession, Ledger, McpSessionRef};
use crate::principal::Principal;
use crate::tools::{Ctx, StatusLine};
use jsonrpc::{Message, RpcError};
use serde_json::Value;
use server::Failure;
use worker::{Env, Headers, Method, Request, Response};

/// Requests with a body larger than this are refused with 413. It leaves room for the largest
/// file write (8 MiB, base64-encoded in JSON).
pub const MAX_BODY_BYTES: usize = 12 * 1024 * 1024;
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// How the client wants responses to requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Sse,
}

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let origin = header(req.headers(), "origin");
    if let Some(origin) = &origin {
        if !origin_allowed(env, &req, origin) {
            return Ok(error_response(
                403,
                &jsonrpc::invalid_request(None, format!("origin {origin} is not allowed; add it to {} to allow browser clients from it", config::ALLOWED_ORIGINS)),
            ));
        }
    }
    if req.method() == Method::Options {
        return Ok(with_cors(
            Response::empty()?.with_status(204),
            origin.as_deref(),
        ));
    }
    let base = http::base_url(env, &req);
    let principal = match auth::authenticate(env, req.headers(), &base).await {
        Ok(principal) => principal,
        Err(e) => return Ok(with_cors(unauthorized(&e, &base), origin.as_deref())),
    };
    let response = match req.method() {
        Method::Post => post(req, env, principal).await?,
        Method::Delete => delete(req, env, principal).await?,
        _ => {
            let mut response = error_response(
                405,
                &jsonrpc::invalid_request(
                    None,
                    "this endpoint takes POST (JSON-RPC messages) and DELETE (end a session); it offers no server-initiated stream",
                ),
            );
            let _ = response.headers_mut().set("allow", "POST, DELETE, OPTIONS");
            response
        }
    };
    Ok(with_cors(response, origin.as_deref()))
}

async fn post(mut req: Request, env: &Env, principal: Principal) -> Result<Response> {
    let headers = req.headers().clone();
    let Some(mode) = response_mode(header(&headers, "accept").as_deref()) else {
        return Ok(error_response(
            406,
            &jsonrpc::invalid_request(
                None,
                "Accept must allow application/json or text/event-stream",
            ),
        ));
    };
    if let Some(content_type) = header(&headers, "content-type") {
        if !content_type
            .to_ascii_lowercase()
            .starts_with("application/json")
        {
            return Ok(error_response(
                415,
                &jsonrpc::invalid_request(
                    None,
                    format!("Content-Type must be application/json (got {content_type})"),
                ),
            ));
        }
    }
    let body = match http::read_capped(&mut req, MAX_BODY_BYTES).await? {
        Some(body) => body,
        None => {
            return Ok(error_response(
                413,
                &jsonrpc::invalid_request(
                    None,
                    format!(
                        "request body exceeds the {} MiB limit",
                        MAX_BODY_BYTES / (1024 * 1024)
                    ),
                ),
            ))
        }
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => return Ok(error_response(400, &jsonrpc::parse_error(e))),
    };
    let message = match jsonrpc::classify(value) {
        Ok(message) => message,
        Err(e) => return Ok(error_response(400, &e)),
    };
    if let Message::Request { id, method, params } = &message {
        if method == "initialize" {
            return match server::initialize(env, &principal, id.clone(), params.clone()).await {
                Ok((value, session_id)) => {
                    let mut response = respond(mode, &value)?;
                    response.headers_mut().set("mcp-session-id", &session_id)?;
                    Ok(response)
                }
                Err(e) => Ok(error_response(200, &e)),
            };
        }
    }
    if modern::is_modern(&message, &|name| header(&headers, name)) {
        return post_modern(&req, env, principal, message, mode, &headers).await;
    }
    let request_id = match &message {
        Message::Request { id, .. } => Some(id.clone()),
        _ => None,
    };
    let version = header(&headers, VERSION_HEADER);
    if let Some(version) = &version {
        if !protocol::is_supported(version) {
            return Ok(error_response(
                400,
                &jsonrpc::invalid_request(
                    request_id,
                    format!(
                        "unsupported MCP-Protocol-Version {version:?}; this server speaks {}",
                        protocol::SUPPORTED.join(", ")
                    ),
                ),
            ));
        }
    }
    let version = version.unwrap_or_else(|| protocol::ASSUMED_WITHOUT_HEADER.to_string());
    let ledger = match session_ledger(env, &headers, &principal, request_id.clone())? {
        Ok(ledger) => ledger,
        Err(response) => return Ok(response),
    };
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        // Notifications (initialized, cancelled, …) and stray responses need no answer.
        Message::Notification | Message::Response => {
            return Ok(match ledger.check_mcp_session().await {
                Ok(()) => Response::empty()?.with_status(202),
                Err(e) => error_response(404, &jsonrpc::invalid_request(None, e.message)),
            });
        }
    };
    let base_url = http::base_url(env, &req);
    let accepts_sse = accepts(header(&headers, "accept").as_deref(), "text/event-stream");
    let Some(token) = progress::token(params.as_ref()).filter(|_| accepts_sse) else {
        let ctx = Ctx {
            env,
            principal,
            ledger,
            base_url,
            status: None,
        };
        return finish(
            mode,
            server::dispatch(&ctx, &version, id, &method, params).await,
        );
    };
    let env = env.clone();
    let status = StatusLine::default();
    let reported = status.clone();
    let pending = Box::pin(async move {
        let ctx = Ctx {
            env: &env,
            principal,
            ledger,
            base_url,
            status: Some(reported),
        };
        server::dispatch(&ctx, &version, id, &method, params).await
    });
    match progress::run(pending, token, status).await? {
        progress::Finished::Quickly(outcome) => finish(mode, outcome),
        progress::Finished::Streaming(response) => Ok(response),
    }
}

/// A request of the modern era: no session, the ladder first, then the method; results
/// decorated as the era wants them, errors with its HTTP statuses.
async fn post_modern(
    req: &Request,
    env: &Env,
    principal: Principal,
    message: Message,
    mode: Mode,
    headers: &Headers,
) -> Result<Response> {
    let Message::Request { id, method, params } = message else {
        // Notifications and stray responses need no answer (and there is no session).
        return Ok(Response::empty()?.with_status(202));
    };
    let version = match modern::check(&id, &method, params.as_ref(), &|name| header(headers, name))
    {
        Ok(version) => version,
        Err(refusal) => return Ok(error_response(refusal.status, &refusal.error)),
    };
    let ledger = Ledger::get(env)?;
    let base_url = http::base_url(env, req);
    let accepts_sse = accepts(header(headers, "accept").as_deref(), "text/event-stream");
    let token = progress::token(params.as_ref()).filter(|_| accepts_sse);
    let status = token.as_ref().map(|_| StatusLine::default());
    let env = env.clone();
    let reported = status.clone();
    let pending = Box::pin(async move {
        let ctx = Ctx {
            env: &env,
            principal,
            ledger,
            base_url,
            status: reported,
        };
        let outcome = match method.as_str() {
            "server/discover" => Ok(jsonrpc::result(&id, modern::discover())),
            "tools/list" | "tools/call" => {
                server::dispatch(&ctx, version, id, &method, params).await
            }
            _ => Err(Failure::Rpc(modern::method_not_found(id, &method))),
        };
        outcome.map(|value| modern::decorate(&method, value))
    });
    let outcome = match (token, status) {
        (Some(token), Some(status)) => match progress::run(pending, token, status).await? {
            progress::Finished::Quickly(outcome) => outcome,
            progress::Finished::Streaming(response) => return Ok(response),
        },
        _ => pending.await,
    };
    match outcome {
        Ok(value) => respond(mode, &value),
        Err(Failure::Rpc(e) | Failure::SessionGone(e)) => {
            Ok(error_response(modern::status_of(&e), &e))
        }
    }
}

fn finish(mode: Mode, outcome: progress::Outcome) -> Result<Response> {
    match outcome {
        Ok(value) => respond(mode, &value),
        Err(Failure::SessionGone(e)) => Ok(error_response(404, &e)),
        Err(Failure::Rpc(e)) => Ok(error_response(200, &e)),
    }
}

async fn delete(req: Request, env: &Env, principal: Principal) -> Result<Response> {
    let ledger = match session_ledger(env, req.headers(), &principal, None)? {
        Ok(ledger) => ledger,
        Err(response) => return Ok(response),
    };
    Ok(match ledger.call(CloseMcpSession {}).await {
        Ok(_) => Response::empty()?.with_status(204),
        Err(e) => error_response(e.http_status(), &jsonrpc::invalid_request(None, e.message)),
    })
}

/// The ledger bound to the request's MCP session, or the 400 / 404 response for a missing or
/// malformed `Mcp-Session-Id`.
fn session_ledger(
    env: &Env,
    headers: &Headers,
    principal: &Principal,
    id: Option<rmcp::model::RequestId>,
) -> Result<std::result::Result<Ledger, Response>> {
    let Some(session_id) = header(headers, SESSION_HEADER) else {
        return Ok(Err(error_response(
            400,
            &jsonrpc::invalid_request(id, "missing Mcp-Session-Id header: send initialize first and echo the session id it returns"),
        )));
    };
    if !ids::is_valid(ids::MCP_SESSION, &session_id) {
        return Ok(Err(error_response(
            404,
            &jsonrpc::invalid_request(
                id,
                "MCP session not found, expired or ended: send initialize to start a new one",
            ),
        )));
    }
    let session = McpSessionRef {
        id: session_id,
        principal: principal.id.clone(),
    };
    Ok(Ok(Ledger::for_mcp_session(env, session)?))
}

/// JSON unless the client accepts only SSE; `None` when it accepts neither.
fn response_mode(accept: Option<&str>) -> Option<Mode> {
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
fn accepts(accept: Option<&str>, media_type: &str) -> bool {
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

fn respond(mode: Mode, value: &Value) -> Result<Response> {
    Ok(match mode {
        Mode::Json => http::json(200, value),
        Mode::Sse => {
            let mut response = Response::from_bytes(http::sse_event(value))?;
            response
                .headers_mut()
                .set("content-type", "text/event-stream")?;
            response.headers_mut().set("cache-control", "no-cache")?;
            response
        }
    })
}

fn error_response(status: u16, error: &RpcError) -> Response {
    http::json(status, &error.to_json())
}

fn unauthorized(error: &AuthError, base: &str) -> Response {
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

/// Browsers send Origin; only this deployment's own origin and configured ones may call.
/// Requests without Origin (CLI and server-side clients) are not affected.
fn origin_allowed(env: &Env, req: &Request, origin: &str) -> bool {
    let own = req.url().ok();
    let public = config::public_url(env);
    origin_allowed_for(
        own.as_ref(),
        public.as_deref(),
        &config::allowed_origins(env),
        origin,
    )
}

/// The Origin rule. The request's own origin counts only over https or on a loopback host: a
/// page that rebinds its own name to a local handoff (DNS rebinding) sends its name as both
/// Host and Origin, over http. A handoff on a loopback host also takes pages on loopback
/// origins (`localhost`, `127.0.0.1`, `[::1]`, any port — a local MCP Inspector, say), never
/// names under `localhost` (preview origins live there).
fn origin_allowed_for(
    own: Option<&worker::Url>,
    public: Option<&str>,
    allowed: &[String],
    origin: &str,
) -> bool {
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    let own_loopback = own.and_then(|u| u.host()).is_some_and(http::is_loopback);
    let own_trusted = own_loopback || own.is_some_and(|u| u.scheme() == "https");
    let own_origin = own.map(|u| u.origin().ascii_serialization().to_ascii_lowercase());
    let origin_loopback = worker::Url::parse(&origin)
        .ok()
        .is_some_and(|u| u.host().is_some_and(http::is_loopback));
    (own_trusted && own_origin.as_deref() == Some(origin.as_str()))
        || public.map(str::to_ascii_lowercase).as_deref() == Some(origin.as_str())
        || allowed.contains(&origin)
        || (own_loopback && origin_loopback)
}

fn with_cors(mut response: Response, origin: Option<&str>) -> Response {
    if let Some(origin) = origin {
        let headers = response.headers_mut();
        let _ = headers.set("access-control-allow-origin", origin);
        let _ = headers.set("vary", "Origin");
        let _ = headers.set("access-control-allow-methods", "POST, DELETE, OPTIONS");
        let _ = headers.set(
            "access-control-allow-headers",
            "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id",
        );
        let _ = headers.set(
            "access-control-expose-headers",
            "mcp-session-id, www-authenticate",
        );
    }
    response
}

fn header(headers: &Headers, name: &str) -> Option<String> {
    headers
        .get(name)
        .ok()
        .flatten()
        .filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::origin_allowed_for;
    use worker::Url;

    fn allowed(own: &str, origin: &str) -> bool {
        let own = Url::parse(own).expect("a URL");
        origin_allowed_for(Some(&own), None, &["https://app.example".into()], origin)
    }

    #[test]
    fn origins_are_own_configured_or_loopback_beside_a_loopback_server() {
        // A handoff on loopback: its own origin and other loopback pages, any port.
        assert!(allowed(
            "http://127.0.0.1:8787/mcp",
            "http://127.0.0.1:8787"
        ));
        assert!(allowed(
            "http://127.0.0.1:8787/mcp",
            "http://localhost:6274"
        ));
        assert!(allowed("http://localhost:8787/mcp", "http://[::1]:3000"));
        // Never names under localhost (preview origins) or anything else.
        assert!(!allowed(
            "http://127.0.0.1:8787/mcp",
            "http://p1.preview.localhost:8787"
        ));
        assert!(!allowed(
            "http://127.0.0.1:8787/mcp",
            "https://evil.example"
        ));
        // DNS rebinding: the attacker's name as Host and Origin, over http.
        assert!(!allowed(
            "http://evil.example:8787/mcp",
            "http://evil.example:8787"
        ));
        assert!(!allowed(
            "http://evil.example:8787/mcp",
            "http://localhost:8787"
        ));
        // A deployment over https: its own origin and the configured ones.
        assert!(allowed(
            "https://handoff.example.workers.dev/mcp",
            "https://handoff.example.workers.dev"
        ));
        assert!(allowed(
            "https://handoff.example.workers.dev/mcp",
            "https://app.example/"
        ));
        assert!(!allowed(
            "https://handoff.example.workers.dev/mcp",
            "http://localhost:6274"
        ));
    }
}
