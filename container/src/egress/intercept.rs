//! A CONNECT tunnel the proxy opens itself because a secret may go to its destination: TLS with
//! the sandbox's client under a certificate from the sandbox's authority, each request read,
//! its headers' stand-ins swapped for the secrets' values, and sent on over TLS to the real
//! host (its certificate checked as usual). The sandbox's secrets are read again for every
//! request, so a detached secret stops at once. Requests that swapped something in are logged,
//! with the secrets' names.

use super::authority::Authority;
use super::http::{strip_hop_by_hop, text, Body};
use super::{swap, upstream, Served};
use crate::clock::now_ms;
use handoff_wire::{EgressEntry, Verdict};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_HEAD: usize = 64 * 1024;

/// The destination of an opened tunnel.
pub struct Destination {
    /// The name the sandbox asked for (the certificate's name and the upstream's TLS name).
    pub host: String,
    pub port: u16,
    pub addrs: Vec<SocketAddr>,
}

/// Serves the tunnel until the client closes it. `first` is the upstream connection already
/// made when the tunnel was accepted; later requests connect again.
pub async fn serve(
    sandbox: Arc<dyn Served>,
    authority: Arc<Authority>,
    client: Upgraded,
    destination: Destination,
    first: upstream::Stream,
) {
    let Ok(config) = authority.server_config(&destination.host) else {
        return;
    };
    let Ok(tls) = tokio_rustls::TlsAcceptor::from(config)
        .accept(TokioIo::new(client))
        .await
    else {
        return;
    };
    let destination = Arc::new(destination);
    let first = Arc::new(Mutex::new(Some(first)));
    let service = service_fn(move |req| {
        let (sandbox, destination, first) = (sandbox.clone(), destination.clone(), first.clone());
        async move {
            let spare = first.lock().unwrap_or_else(|p| p.into_inner()).take();
            Ok::<_, Infallible>(match forward(&*sandbox, &destination, spare, req).await {
                Ok(response) => response,
                Err(message) => text(StatusCode::BAD_GATEWAY, &message),
            })
        }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

async fn forward(
    sandbox: &dyn Served,
    destination: &Destination,
    spare: Option<upstream::Stream>,
    req: Request<Incoming>,
) -> Result<Response<Body>, String> {
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let grants = swap::for_destination(&sandbox.spec(), &destination.host, destination.port);
    let names = swap::swap_headers(&mut parts.headers, &grants);
    if !names.is_empty() {
        sandbox.log().record(EgressEntry {
            at: now_ms(),
            host: destination.host.clone(),
            port: destination.port,
            method: parts.method.to_string(),
            verdict: Verdict::Allowed,
            reason: format!("secret {} swapped in", names.join(", ")),
        });
    }
    let tcp = match spare {
        Some(stream) => stream,
        None => upstream::connect(&destination.addrs)
            .await
            .map_err(|e| format!("{}:{}: {e}", destination.host, destination.port))?,
    };
    let request = Request::from_parts(parts, body);
    let response = upstream::send(tcp, true, &destination.host, request).await?;
    Ok(response.map(|body| body.boxed()))
}
