//! The MCP endpoint `/mcp` over Streamable HTTP: Origin and auth checks, body cap, session and
//! protocol-version headers, JSON or SSE responses. Both eras are served here, chosen per
//! request: the initialize era (sessions) and 2026-07-28 (`modern`, stateless). Methods are
//! handled in `server`.

mod batch;
mod failure;
pub(crate) mod jsonrpc;
mod modern;
mod origin;
mod progress;
mod prompts;
mod protocol;
pub(crate) mod resources;
mod server;
mod stream;
mod task_view;
mod tasks;
mod transport;

use crate::auth;
use crate::config;
use crate::error::Result;
use crate::http;
use crate::ids;
use crate::json_cost::{self, Refused};
use crate::ledger::api::{CloseMcpSession, Ledger, McpSessionRef};
use crate::mcp_session_ids;
use crate::principal::Principal;
use crate::tools::{Ctx, StatusLine};
use failure::Failure;
use jsonrpc::Message;
use serde_json::Value;
use task_view::Era;
use transport::{
    accepts, error_response, header, respond, respond_encoded, response_mode, unauthorized,
    with_cors, Mode,
};
use worker::{Env, Headers, Method, Request, Response};

/// Requests with a body larger than this are refused with 413. It leaves room for the largest
/// file write (8 MiB, base64-encoded in JSON).
pub const MAX_BODY_BYTES: usize = 12 * 1024 * 1024;
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let origin = header(req.headers(), "origin");
    if let Some(origin) = &origin {
        if !origin::allowed(env, &req, origin) {
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
        Method::Get => get(req, env, principal).await?,
        _ => {
            let mut response = error_response(
                405,
                &jsonrpc::invalid_request(
                    None,
                    "this endpoint takes POST (JSON-RPC messages), GET (the session's stream) and DELETE (end a session)",
                ),
            );
            let _ = response
                .headers_mut()
                .set("allow", "GET, POST, DELETE, OPTIONS");
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
    let value: Value = match json_cost::parse(&body, json_cost::TREE_MAX) {
        Ok(value) => value,
        Err(Refused::Invalid(e)) => return Ok(error_response(400, &jsonrpc::parse_error(e))),
        Err(too_large) => {
            return Ok(error_response(
                413,
                &jsonrpc::invalid_request(
                    None,
                    format!("request body refused: {too_large}; send fewer values at once"),
                ),
            ))
        }
    };
    if let Value::Array(items) = value {
        return post_batch(&req, env, principal, mode, items).await;
    }
    let message = match jsonrpc::classify(value) {
        Ok(message) => message,
        Err(e) => return Ok(error_response(400, &e)),
    };
    if let Message::Request { id, method, params } = &message {
        if method == "initialize" {
            return match server::initialize(env, &principal, id.clone(), params.clone()).await {
                Ok((encoded, session_id)) => {
                    let mut response = respond_encoded(mode, &encoded)?;
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
    if method == "tools/list" {
        return match server::tools_list(&ledger, &id, Era::Legacy, params.as_ref()).await {
            Ok(encoded) => respond_encoded(mode, &encoded),
            Err(failure) => finish(mode, Err(failure)),
        };
    }
    let task_ttl_ms = match legacy_task_ttl(&version, &method, params.as_ref()) {
        Ok(ttl) => ttl,
        Err(message) => {
            return Ok(error_response(200, &jsonrpc::invalid_params(id, message)));
        }
    };
    let base_url = http::base_url(env, &req);
    let accepts_sse = accepts(header(&headers, "accept").as_deref(), "text/event-stream");
    let progress = progress_of(&method, params.as_ref(), accepts_sse);
    let status = progress.as_ref().map(|(_, status)| status.clone());
    let env = env.clone();
    let pending = Box::pin(async move {
        let ctx = Ctx {
            env: &env,
            principal,
            ledger,
            base_url,
            status,
            task_ttl_ms,
        };
        server::dispatch(&ctx, &version, id, &method, params).await
    });
    match outcome_or_stream(pending, progress).await? {
        Ok(outcome) => finish(mode, outcome),
        Err(stream) => Ok(stream),
    }
}

/// A JSON-RPC batch: 2025-03-26 only, within its session.
async fn post_batch(
    req: &Request,
    env: &Env,
    principal: Principal,
    mode: Mode,
    items: Vec<Value>,
) -> Result<Response> {
    let headers = req.headers();
    let version = header(headers, VERSION_HEADER)
        .unwrap_or_else(|| protocol::ASSUMED_WITHOUT_HEADER.to_string());
    if let Some((status, error)) = batch::refused(&version, &items) {
        return Ok(error_response(status, &error));
    }
    let ledger = match session_ledger(env, headers, &principal, None)? {
        Ok(ledger) => ledger,
        Err(response) => return Ok(response),
    };
    let base_url = http::base_url(env, req);
    batch::post(env, principal, ledger, base_url, mode, items).await
}

/// The progress token and status line of a request whose client asked for progress (and
/// accepts an SSE answer). `tasks/result` blocks until a run ends, so it always streams to a
/// client that accepts SSE: without a token, comments keep the connection alive.
fn progress_of(
    method: &str,
    params: Option<&serde_json::Map<String, Value>>,
    accepts_sse: bool,
) -> Option<(Option<Value>, StatusLine)> {
    if !accepts_sse {
        return None;
    }
    match progress::token(params) {
        Some(token) => Some((Some(token), StatusLine::default())),
        None if method == "tasks/result" => Some((None, StatusLine::default())),
        None => None,
    }
}

/// The TTL of an initialize-era task-augmented `tools/call` (`params.task`), if it is one.
fn legacy_task_ttl(
    version: &str,
    method: &str,
    params: Option<&serde_json::Map<String, Value>>,
) -> std::result::Result<Option<i64>, String> {
    if method != "tools/call" || version != protocol::TASKS_VERSION {
        return Ok(None);
    }
    tasks::requested_ttl(params)
}

/// Awaits a request's work; with progress asked for, the answer becomes an SSE stream once
/// the work outlasts the first progress tick (`Err` carries that stream).
async fn outcome_or_stream(
    pending: futures::future::LocalBoxFuture<'static, progress::Outcome>,
    progress: Option<(Option<Value>, StatusLine)>,
) -> Result<std::result::Result<progress::Outcome, Response>> {
    let Some((token, status)) = progress else {
        return Ok(Ok(pending.await));
    };
    Ok(match progress::run(pending, token, status).await? {
        progress::Finished::Quickly(outcome) => Ok(outcome),
        progress::Finished::Streaming(response) => Err(response),
    })
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
    if method == "subscriptions/listen" {
        if !accepts_sse {
            return Ok(error_response(
                406,
                &jsonrpc::invalid_request(
                    Some(id),
                    "subscriptions/listen answers a stream: Accept must allow text/event-stream",
                ),
            ));
        }
        let (honoured, task_ids, watched) = stream::listen_filter(params.as_ref());
        let subscription_id = serde_json::to_value(&id).unwrap_or(Value::Null);
        let first = stream::acknowledged(&honoured, &subscription_id);
        let watch = stream::Watch::Listed {
            task_ids,
            watched,
            subscription_id,
        };
        return stream::open(env, principal, base_url, ledger, watch, None, first).await;
    }
    if method == "tools/list" {
        return match server::tools_list(&ledger, &id, Era::Modern, params.as_ref()).await {
            Ok(encoded) => respond_encoded(mode, &encoded),
            Err(Failure::Rpc(e) | Failure::SessionGone(e)) => {
                Ok(error_response(modern::status_of(&e), &e))
            }
        };
    }
    let progress = progress_of(&method, params.as_ref(), accepts_sse);
    let status = progress.as_ref().map(|(_, status)| status.clone());
    let declared = tasks::declared(params.as_ref());
    let task_ttl_ms =
        (method == "tools/call" && declared && tasks::modern_augments(params.as_ref()))
            .then_some(tasks::DEFAULT_TTL_MS);
    let env = env.clone();
    let pending = Box::pin(async move {
        let ctx = Ctx {
            env: &env,
            principal,
            ledger,
            base_url,
            status,
            task_ttl_ms,
        };
        let outcome = match method.as_str() {
            "server/discover" => Ok(jsonrpc::result(&id, modern::discover())),
            "tools/call"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete" => server::dispatch(&ctx, version, id, &method, params).await,
            "tasks/get" | "tasks/update" | "tasks/cancel" if !declared => {
                Err(Failure::Rpc(tasks::undeclared(&id)))
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" => {
                server::dispatch(&ctx, version, id, &method, params).await
            }
            _ => Err(Failure::Rpc(modern::method_not_found(id, &method))),
        };
        outcome.map(|value| modern::decorate(&method, value))
    });
    let outcome = match outcome_or_stream(pending, progress).await? {
        Ok(outcome) => outcome,
        Err(stream) => return Ok(stream),
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

/// `GET /mcp` (initialize era): the session's stream of task status and resource updates,
/// resumed after `Last-Event-ID` when the client sends one.
async fn get(req: Request, env: &Env, principal: Principal) -> Result<Response> {
    let headers = req.headers();
    if !accepts(header(headers, "accept").as_deref(), "text/event-stream") {
        return Ok(error_response(
            406,
            &jsonrpc::invalid_request(
                None,
                "GET /mcp opens a stream: Accept must allow text/event-stream",
            ),
        ));
    }
    if let Some(version) = header(headers, VERSION_HEADER) {
        if !protocol::is_supported(&version) {
            return Ok(error_response(
                400,
                &jsonrpc::invalid_request(
                    None,
                    format!("the GET stream belongs to the initialize era ({}); 2026-07-28 clients use subscriptions/listen", protocol::SUPPORTED.join(", ")),
                ),
            ));
        }
    }
    let ledger = match session_ledger(env, headers, &principal, None)? {
        Ok(ledger) => ledger,
        Err(response) => return Ok(response),
    };
    if let Err(e) = ledger.check_mcp_session().await {
        return Ok(error_response(
            404,
            &jsonrpc::invalid_request(None, e.message),
        ));
    }
    let start = header(headers, "last-event-id").and_then(|id| stream::cursor_of(&id));
    let base_url = http::base_url(env, &req);
    // The retry hint also makes the stream's headers go out at once.
    let first = b"retry: 2000\n\n".to_vec();
    stream::open(
        env,
        principal,
        base_url,
        ledger,
        stream::Watch::Session,
        start,
        first,
    )
    .await
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
    // A random id (the ledger opened it) or a signed one this caller was given; anything else,
    // a forged or another caller's signed id included, is refused without asking the ledger.
    let signed_for_caller = || {
        mcp_session_ids::parse(&session_id).is_some_and(|signed| {
            config::signing_key(env).is_some_and(|key| signed.is_for(&key, &principal.id))
        })
    };
    if !ids::is_valid(ids::MCP_SESSION, &session_id) && !signed_for_caller() {
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
