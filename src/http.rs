//! Plain HTTP responses shared by the routes: JSON bodies, `/health`, the index, 404 and 500.

use crate::config;
use crate::error::{Error, Result};
use futures::StreamExt;
use serde::Serialize;
use serde_json::json;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_error, Env, Headers, Request, Response, ResponseBuilder};

/// Reads a request body of at most `max` bytes, or `None` when it is larger: checked against
/// Content-Length when there is one (the runtime holds the body to it), else while streaming.
pub async fn read_capped(req: &mut Request, max: usize) -> Result<Option<Vec<u8>>> {
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Ok(None);
    }
    if declared.is_some() {
        return Ok(Some(req.bytes().await?));
    }
    let mut body = Vec::new();
    let Ok(mut stream) = req.stream() else {
        return Ok(Some(body)); // no body at all
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > max {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// A response's whole body as text, read by the runtime in one step. workers-rs reads the
/// streamed body of a `fetch` reply chunk by chunk across the wasm boundary, a promise and a
/// copy per chunk; this is one promise.
pub async fn body_text(response: Response) -> Result<String> {
    let response: worker::web_sys::Response = response.into();
    let promise = response.text().map_err(worker::Error::from)?;
    let text = JsFuture::from(promise).await.map_err(worker::Error::from)?;
    text.as_string()
        .ok_or_else(|| Error::internal("a response body that is not text".to_string()))
}

/// One server-sent event carrying a JSON-RPC message (the Streamable HTTP framing).
pub fn sse_event(message: &impl std::fmt::Display) -> Vec<u8> {
    format!("event: message\ndata: {message}\n\n").into_bytes()
}

/// One server-sent event with an id (which a client reconnecting sends as `Last-Event-ID`).
/// Ids never hold a line break: they are made by the server.
pub fn sse_event_with_id(id: &str, message: &impl std::fmt::Display) -> Vec<u8> {
    format!("id: {id}\nevent: message\ndata: {message}\n\n").into_bytes()
}

/// Whether a URL host is the loopback interface: `localhost` itself (not names under it),
/// 127.0.0.0/8 or `::1`.
pub fn is_loopback(host: worker::url::Host<&str>) -> bool {
    match host {
        worker::url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        worker::url::Host::Ipv4(ip) => ip.is_loopback(),
        worker::url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// `value` encoded for a URL's query (`application/x-www-form-urlencoded`).
pub fn query_value(value: &str) -> String {
    worker::url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

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

/// `GET /health`: unauthenticated liveness plus configuration warnings (names only) and the
/// size of this isolate's WebAssembly memory (what `cargo xtask soak` watches for leaks: it
/// only grows, so a leak in handoff's own heap shows there, apart from the runtime's memory).
pub fn health(env: &Env) -> Result<Response> {
    Ok(json(
        200,
        &json!({
            "status": "ok",
            "name": "handoff",
            "version": env!("CARGO_PKG_VERSION"),
            "warnings": config::warnings(env),
            "wasmMemoryBytes": wasm_memory_bytes(),
        }),
    ))
}

/// The WebAssembly linear memory's size (none outside wasm32).
fn wasm_memory_bytes() -> Option<u64> {
    #[cfg(target_arch = "wasm32")]
    {
        Some(core::arch::wasm32::memory_size(0) as u64 * 65_536)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        None
    }
}

pub fn index() -> Result<Response> {
    Ok(Response::ok(
        "handoff — a remote MCP server for long coding tasks.\n\
         MCP endpoint: POST /mcp (Streamable HTTP; OAuth 2.1 or an API token)\n\
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

/// The deployment's public base URL: `HANDOFF_PUBLIC_URL`, else the origin this request came in
/// on. Links, the OAuth issuer and the MCP resource URL are built on it.
pub fn base_url(env: &Env, req: &Request) -> String {
    config::public_url(env).unwrap_or_else(|| {
        let url = req.inner().url();
        match serialized_origin(&url) {
            Some(origin) => origin.to_string(),
            None => worker::Url::parse(&url)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default(),
        }
    })
}

/// The origin of a URL as the runtime serializes a request's (WHATWG: scheme and host already
/// lower case, default port dropped, a path always present), cut from the text instead of
/// parsing it again; `None` for anything else (userinfo included), which is parsed.
fn serialized_origin(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let end = rest.find('/')?;
    let authority = &rest[..end];
    let plain = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.:[]".contains(&b);
    let default_port = authority.ends_with(":80") || authority.ends_with(":443");
    (!authority.is_empty() && !default_port && authority.bytes().all(plain))
        .then(|| &url[..scheme.len() + 3 + end])
}

#[cfg(test)]
mod tests {
    use super::serialized_origin;

    #[test]
    fn origins_are_cut_only_from_urls_the_runtime_serialized() {
        let cut = |url: &str| serialized_origin(url).map(str::to_string);
        let parsed = |url: &str| {
            worker::Url::parse(url)
                .ok()
                .map(|u| u.origin().ascii_serialization())
        };
        for url in [
            "https://handoff.example.com/mcp?x=1",
            "http://127.0.0.1:8787/mcp",
            "http://[::1]:8787/",
            "https://a-b.example/runs/run_1#frag",
        ] {
            assert_eq!(cut(url), parsed(url), "{url}");
        }
        // Anything unusual is left to the parser.
        for url in [
            "https://user:pw@example.com/",
            "https://Example.com/",
            "https://example.com:443/",
            "http://example.com:80/",
            "ftp://example.com/",
            "https://example.com",
            "https:///path",
        ] {
            assert_eq!(cut(url), None, "{url}");
        }
    }
}
