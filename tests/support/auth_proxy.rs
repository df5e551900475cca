//! A forwarding proxy that adds `Authorization: Bearer <token>` to every request, for clients
//! that cannot send one (the MCP conformance suite). Bodies stream both ways, so SSE answers
//! reach the client as they are produced. Host and Origin are forwarded as the client sent
//! them, so Origin checks see what the client sent.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use futures::TryStreamExt;

#[derive(Clone)]
struct Target {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// Starts the proxy in front of `base` (`http://127.0.0.1:port`); returns its own base URL.
pub fn start(base: &str, token: &str) -> String {
    let target = Target {
        base: base.trim_end_matches('/').to_string(),
        token: token.to_string(),
        http: reqwest::Client::new(),
    };
    let app = axum::Router::new().fallback(forward).with_state(target);
    format!("http://127.0.0.1:{}", crate::serve_forever(app))
}

async fn forward(State(target): State<Target>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
    let mut outgoing = target
        .http
        .request(parts.method.clone(), format!("{}{path}", target.base))
        .body(body);
    for (name, value) in &parts.headers {
        if name != "host" && name != "authorization" && name != "content-length" {
            outgoing = outgoing.header(name, value);
        }
    }
    outgoing = outgoing.bearer_auth(&target.token);
    let upstream = match outgoing.send().await {
        Ok(upstream) => upstream,
        Err(e) => {
            let mut response = Response::new(Body::from(format!("proxy: {e}")));
            *response.status_mut() = axum::http::StatusCode::BAD_GATEWAY;
            return response;
        }
    };
    let mut response = Response::builder().status(upstream.status());
    for (name, value) in upstream.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name, value);
        }
    }
    let stream = upstream.bytes_stream().map_err(std::io::Error::other);
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}
