//! Sandbox previews, each on an origin of its own: `<port>-<expiry>-<sandbox>-<mac>.<preview
//! base>` (see `links::preview_url`). A page a sandbox serves is hostile: on handoff's origin it
//! could drive the owner's signed-in consent page, read run pages or call `/mcp` with the
//! owner's cookies. On its own origin it shares nothing with handoff — no cookies, no storage,
//! no same-origin requests — and the preview base is never handoff's own host. Responses lose
//! `Set-Cookie` and service-worker headers anyway, and service-worker scripts are refused, so a
//! preview can neither plant state in a browser nor outlive its link.
//!
//! The request (method, headers without cookies or credentials, streamed body) goes through the
//! sandbox's object to the daemon and the response streams back.

use crate::config;
use crate::error::{ErrorKind, Result};
use crate::http;
use crate::links;
use crate::sandbox::api as sandbox;
use handoff_wire::{ErrorBody, ErrorCode};
use maud::html;
use worker::{Env, Headers, Request, RequestInit, Response, ResponseBuilder};

/// Request headers never passed to a previewed app.
const REQUEST_DROP: [&str; 4] = ["cookie", "authorization", "proxy-authorization", "host"];
/// Request headers with this prefix are handoff's own, never a visitor's.
const HANDOFF_PREFIX: &str = "x-handoff-";
/// Response headers a previewed app may not set.
const RESPONSE_DROP: [&str; 4] = [
    "set-cookie",
    "set-cookie2",
    "service-worker-allowed",
    "clear-site-data",
];

/// The host a request was sent to, lower case, without the port.
fn request_host(req: &Request) -> Option<String> {
    let header = req.headers().get("host").ok().flatten();
    let host = match header {
        Some(h) => h,
        None => req.url().ok()?.host_str()?.to_string(),
    };
    let host = host.trim().to_ascii_lowercase();
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_string(),
        _ => host,
    };
    Some(host)
}

/// The preview host of a request sent to a preview origin (one label under the base).
pub fn preview_host(req: &Request, env: &Env) -> Option<String> {
    let base = config::preview_base(env)?;
    let host = request_host(req)?;
    let label = host.strip_suffix(&format!(".{}", base.host))?;
    (!label.is_empty() && !label.contains('.')).then_some(host)
}

/// The answer to the old same-origin preview path.
pub fn moved() -> Response {
    http::json(
        404,
        &serde_json::json!({"error": "previews are served on origins of their own now; ask sandbox_preview_url for a fresh link"}),
    )
}

pub async fn handle(req: Request, env: &Env, host: &str) -> Result<Response> {
    let (sandbox_id, port) = match links::verify_preview_host(env, host) {
        Ok(grant) => grant,
        Err(e) => {
            let status = if e.kind == ErrorKind::NotConfigured {
                503
            } else {
                404
            };
            return Ok(http::json(status, &serde_json::json!({"error": e.message})));
        }
    };
    if req
        .headers()
        .get("service-worker")
        .ok()
        .flatten()
        .is_some_and(|v| v.eq_ignore_ascii_case("script"))
    {
        return Ok(http::json(
            403,
            &serde_json::json!({"error": "previews may not register service workers"}),
        ));
    }
    let page = wants_page(&req);
    let url = req.url()?;
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    let tail = url.path().trim_start_matches('/');
    let headers = Headers::new();
    for (name, value) in req.headers().entries() {
        let lower = name.to_ascii_lowercase();
        if !REQUEST_DROP.contains(&lower.as_str()) && !lower.starts_with(HANDOFF_PREFIX) {
            headers.append(&name, &value)?;
        }
    }
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(headers);
    if let Some(body) = req.inner().body() {
        init.with_body(Some(body.into()));
    }
    let inner = Request::new_with_init(
        &format!("https://sandbox/preview/{port}/{tail}{query}"),
        &init,
    )?;
    let response = sandbox::preview(&sandbox::client(env, &sandbox_id)?, inner).await?;
    if response.headers().has(handoff_wire::DAEMON_ERROR)? {
        return not_served(response, port, page).await;
    }
    // A WebSocket the app accepted (a live view of the desktop) passes through as it is.
    if response.status_code() == 101 {
        // The subprotocol the app chose goes back with it (browsers insist on it).
        let protocol = response.headers().get("sec-websocket-protocol")?;
        if let Some(socket) = response.websocket() {
            let headers = Headers::new();
            if let Some(protocol) = protocol {
                headers.set("sec-websocket-protocol", &protocol)?;
            }
            return Ok(Response::from_websocket(socket)?.with_headers(headers));
        }
        return Ok(http::json(
            502,
            &serde_json::json!({"error": "the app switched protocols to something other than a WebSocket"}),
        ));
    }
    // A fetched response's headers are immutable: build the answer anew, without what the
    // app may not set.
    let headers = Headers::new();
    for (name, value) in response.headers().entries() {
        if !RESPONSE_DROP.contains(&name.to_ascii_lowercase().as_str()) {
            headers.append(&name, &value)?;
        }
    }
    headers.set("referrer-policy", "no-referrer")?;
    headers.set("x-robots-tag", "noindex")?;
    Ok(ResponseBuilder::new()
        .with_status(response.status_code())
        .with_headers(headers)
        .body(response.body().clone()))
}

/// Whether a browser navigated here (it asks for HTML), rather than a script fetching.
fn wants_page(req: &Request) -> bool {
    req.headers()
        .get("accept")
        .ok()
        .flatten()
        .is_some_and(|accept| accept.contains("text/html"))
}

/// How often the page for a closed port looks again, in seconds.
const RETRY_SECONDS: u32 = 5;

/// The daemon's own answer when it got none from the app: nothing listens on the port (yet) —
/// 502, as a gateway answers — or the server there did not answer in time. A browser gets a
/// page that says so (and, while the port is closed, looks again by itself), anything else
/// `{"error"}` like handoff's other preview errors. (The daemon marks only its own errors: a
/// program on the port cannot dress its answer up as one.)
async fn not_served(response: Response, port: u16, page: bool) -> Result<Response> {
    let status = response.status_code();
    let text = http::body_text(response).await?;
    let (status, message, closed) = match serde_json::from_str::<ErrorBody>(&text) {
        Ok(error) if error.code == ErrorCode::PortClosed => (502, error.message, true),
        Ok(error) => (status, error.message, false),
        Err(_) => (status, format!("the sandbox answered HTTP {status}"), false),
    };
    if !page {
        return Ok(http::json(status, &serde_json::json!({"error": message})));
    }
    let (title, text, refresh) = if closed {
        (
            format!("Nothing on port {port} yet"),
            format!(
                "Nothing is listening on port {port} in the sandbox. Start a server there; this \
                 page looks again every {RETRY_SECONDS} seconds."
            ),
            html! { meta http-equiv="refresh" content=(RETRY_SECONDS); },
        )
    } else {
        (format!("Port {port} did not answer"), message, html! {})
    };
    crate::html::respond(
        status,
        &crate::html::document(&title, refresh, html! { p { (text) } }),
    )
}
