//! What workerd asks of the sidecar, over HTTP/1 on the ingress address: `PUT /egress` (kept,
//! answered 200), `GET /ca` (the CA certificate the image carries) and `CONNECT
//! 127.0.0.1:<port>` (a stream to that port of the container; 400 while nothing listens there,
//! which workerd takes as "not ready yet"). Requests from inside the namespace (loopback peers:
//! the sandbox's own processes) are refused, and only loopback ports can be reached.

use crate::Config;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_BODY: usize = 64 * 1024;

struct State {
    ca: Vec<u8>,
    /// The last egress settings workerd sent (kept for the logs).
    egress: Mutex<String>,
}

pub async fn serve(config: Config) -> Result<(), String> {
    let ca = std::fs::read(&config.ca).map_err(|e| format!("{}: {e}", config.ca.display()))?;
    let state = Arc::new(State {
        ca,
        egress: Mutex::new(String::new()),
    });
    let listener = tokio::net::TcpListener::bind(config.ingress)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.ingress))?;
    println!("handoff-egress: ingress on {}", config.ingress);
    loop {
        let (stream, peer) = listener.accept().await.map_err(|e| e.to_string())?;
        // Small request/reply exchanges pass through: never let Nagle hold a piece back.
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(state.clone(), peer, req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if peer.ip().is_loopback() {
        return Ok(reply(
            StatusCode::FORBIDDEN,
            "not from inside the sandbox\n",
        ));
    }
    Ok(match (req.method(), req.uri().path()) {
        (&Method::CONNECT, _) => connect(req).await,
        (&Method::PUT, "/egress") => {
            match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(body) => {
                    let text = String::from_utf8_lossy(&body.to_bytes()).into_owned();
                    println!("handoff-egress: egress settings {text}");
                    *state.egress.lock().unwrap_or_else(|p| p.into_inner()) = text;
                    reply(StatusCode::OK, "")
                }
                Err(_) => reply(StatusCode::PAYLOAD_TOO_LARGE, "egress settings too large\n"),
            }
        }
        (&Method::GET, "/ca") => reply(StatusCode::OK, state.ca.clone()),
        _ => reply(StatusCode::NOT_FOUND, "unknown sidecar request\n"),
    })
}

/// `CONNECT 127.0.0.1:<port>`: opens the port and pipes the upgraded connection to it.
async fn connect(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let target = req
        .headers()
        .get("x-dst-addr")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    let Some(addr) = target.and_then(|t| t.parse::<SocketAddr>().ok()) else {
        return reply(StatusCode::BAD_REQUEST, "CONNECT needs ip:port\n");
    };
    if !addr.ip().is_loopback() {
        return reply(StatusCode::FORBIDDEN, "only the container's own ports\n");
    }
    let upstream =
        match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                stream
            }
            _ => return reply(StatusCode::BAD_REQUEST, "nothing listens there yet\n"),
        };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let mut client = TokioIo::new(upgraded);
            let mut upstream = upstream;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    });
    reply(StatusCode::OK, "")
}
