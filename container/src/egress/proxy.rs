//! Serving a sandbox's proxy listener with hyper: `CONNECT host:port` tunnels and absolute-URI
//! `http://` requests, each checked against the sandbox's policy and logged. Requests a granted
//! credential applies to go to the credential's upstream with its header added. Heads must
//! arrive within 10 s and stay under 64 KiB; a sandbox holds at most 256 connections.

use super::credentials::Active;
use super::http::{strip_hop_by_hop, text, Body};
use super::intercept::{self, Destination};
use super::Served;
use super::{decide, split_host_port, swap, upstream};
use crate::clock::now_ms;
use bytes::Bytes;
use handoff_wire::{EgressEntry, Verdict};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, HOST};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Concurrent connections (tunnels included) one sandbox may hold open through the proxy.
pub const MAX_CONNECTIONS: usize = 256;
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD: usize = 64 * 1024;

/// Serves the sandbox's proxy listener until the task is aborted.
pub fn spawn(
    sandbox: Arc<dyn Served>,
    listener: std::net::TcpListener,
) -> crate::error::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| crate::error::ApiError::internal(format!("egress listener: {e}")))?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    Ok(tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let _ = client.set_nodelay(true);
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                tokio::spawn(refuse(client));
                continue;
            };
            let permit = Arc::new(permit);
            let sandbox = sandbox.clone();
            tokio::spawn(async move {
                let held = permit.clone();
                let service = service_fn(move |req| handle(sandbox.clone(), held.clone(), req));
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .max_buf_size(MAX_HEAD)
                    .serve_connection(TokioIo::new(client), service)
                    .with_upgrades()
                    .await;
                drop(permit);
            });
        }
    }))
}

/// The answer to a connection over the limit.
async fn refuse(mut client: tokio::net::TcpStream) {
    let body = format!(
        "this sandbox already holds {MAX_CONNECTIONS} connections through the egress proxy\n"
    );
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(reply.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// Why the proxy answers a request itself instead of forwarding it.
struct Refusal {
    status: StatusCode,
    message: String,
}

fn refuse_with(status: StatusCode, message: &str) -> Refusal {
    Refusal {
        status,
        message: message.to_string(),
    }
}

/// Where a request goes once aliases and credentials are applied.
struct Route {
    /// What the sandbox asked for (logged).
    host: String,
    port: u16,
    /// The connection actually made.
    addrs: Vec<SocketAddr>,
    dial: String,
    tls: bool,
    verdict: Verdict,
    reason: String,
}

async fn route(
    sandbox: &dyn Served,
    host: String,
    port: u16,
    credential: Option<&Active>,
) -> Result<Route, Refusal> {
    let spec = sandbox.spec();
    let (target_host, target_port, tls) = match credential {
        Some(c) => (c.upstream.host.clone(), c.upstream.port, c.upstream.tls),
        None => (host.clone(), port, false),
    };
    let alias = spec.hosts.get(&target_host).cloned();
    let (dial_host, dial_port) = match &alias {
        Some(target) => split_host_port(target, None)
            .map_err(|reason| refuse_with(StatusCode::BAD_GATEWAY, &reason))?,
        None => (target_host.clone(), target_port),
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((dial_host.as_str(), dial_port))
        .await
        .map(|a| a.collect())
        .unwrap_or_default();
    let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    let (verdict, reason) = match (credential, &alias) {
        (Some(_), _) => (
            Verdict::Allowed,
            format!("a credential granted by handoff for {target_host}"),
        ),
        (None, Some(target)) => (
            Verdict::Allowed,
            format!("configured host {host} -> {target}"),
        ),
        (None, None) => decide(&spec, &host, port, &ips),
    };
    Ok(Route {
        host,
        port,
        addrs,
        dial: format!("{dial_host}:{dial_port}"),
        tls,
        verdict,
        reason,
    })
}

async fn handle(
    sandbox: Arc<dyn Served>,
    permit: Arc<OwnedSemaphorePermit>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(match proxy(&sandbox, permit, req).await {
        Ok(response) => response,
        Err(refusal) => text(refusal.status, &refusal.message),
    })
}

async fn proxy(
    sandbox: &Arc<dyn Served>,
    permit: Arc<OwnedSemaphorePermit>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let method = req.method().clone();
    let (host, port, credential) = if method == Method::CONNECT {
        let authority = req
            .uri()
            .authority()
            .map(|a| a.as_str())
            .unwrap_or_default();
        let (host, port) = split_host_port(authority, None)
            .map_err(|reason| refuse_with(StatusCode::BAD_REQUEST, &reason))?;
        (host, port, None)
    } else {
        if req.uri().scheme_str() != Some("http") {
            return Err(refuse_with(
                StatusCode::BAD_REQUEST,
                "this proxy forwards http:// URLs; use CONNECT for https",
            ));
        }
        let host = req
            .uri()
            .host()
            .and_then(super::normalize_host)
            .ok_or_else(|| refuse_with(StatusCode::BAD_REQUEST, "the request URL names no host"))?;
        let port = req.uri().port_u16().unwrap_or(80);
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let credential = sandbox.credentials().matching(&host, port, &path);
        (host, port, credential)
    };
    let route = route(
        sandbox.as_ref(),
        host,
        port,
        credential.as_ref().map(|(c, _)| &**c),
    )
    .await?;
    // A tunnel to where a secret may go is opened by the proxy, to swap the secret in.
    let grants = if method == Method::CONNECT && route.verdict == Verdict::Allowed {
        swap::for_destination(&sandbox.spec(), &route.host, route.port)
    } else {
        Vec::new()
    };
    let authority = match grants.is_empty() {
        true => None,
        false => sandbox.authority(),
    };
    let mut reason = route.reason.clone();
    if authority.is_some() {
        let names: Vec<&str> = grants.iter().map(|g| g.name.as_str()).collect();
        reason.push_str(&format!(
            "; HTTPS opened by the proxy for secret {}",
            names.join(", ")
        ));
    }
    sandbox.log().record(EgressEntry {
        at: now_ms(),
        host: route.host.clone(),
        port: route.port,
        method: method.to_string(),
        verdict: route.verdict,
        reason,
    });
    if route.verdict == Verdict::Blocked {
        return Err(refuse_with(
            StatusCode::FORBIDDEN,
            &format!("blocked by the sandbox egress policy: {}", route.reason),
        ));
    }
    if route.addrs.is_empty() {
        return Err(refuse_with(
            StatusCode::BAD_GATEWAY,
            &format!("cannot resolve {}", route.dial),
        ));
    }
    let tcp = upstream::connect(&route.addrs)
        .await
        .map_err(|e| refuse_with(StatusCode::BAD_GATEWAY, &format!("{}: {e}", route.dial)))?;
    if method == Method::CONNECT {
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let Ok(upgraded) = hyper::upgrade::on(req).await else {
                return;
            };
            match authority {
                Some(authority) => {
                    let destination = Destination {
                        host: route.host,
                        port: route.port,
                        addrs: route.addrs,
                    };
                    intercept::serve(sandbox, authority, upgraded, destination, tcp).await;
                }
                None => {
                    let mut client = TokioIo::new(upgraded);
                    let mut tcp = tcp;
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut tcp).await;
                }
            }
        });
        return Ok(Response::new(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed(),
        ));
    }
    let forward = rewrite(req, &route, credential.as_ref())?;
    let upstream_host = match &credential {
        Some((c, _)) => c.upstream.host.clone(),
        None => route.host.clone(),
    };
    let response = upstream::send(tcp, route.tls, &upstream_host, forward)
        .await
        .map_err(|e| refuse_with(StatusCode::BAD_GATEWAY, &e))?;
    Ok(response.map(|body| body.boxed()))
}

/// The request as the upstream gets it: origin-form target, `Host` of the destination, no
/// hop-by-hop headers, and the credential's header in place of any the sandbox sent.
fn rewrite(
    req: Request<Incoming>,
    route: &Route,
    credential: Option<&(Arc<Active>, String)>,
) -> Result<Request<Incoming>, Refusal> {
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let (authority, target) = match credential {
        Some((c, path)) => {
            let default = if c.upstream.tls { 443 } else { 80 };
            let authority = if c.upstream.port == default {
                c.upstream.host.clone()
            } else {
                format!("{}:{}", c.upstream.host, c.upstream.port)
            };
            parts.headers.remove(&c.header_name);
            parts
                .headers
                .insert(c.header_name.clone(), c.header_value.clone());
            (authority, path.clone())
        }
        None => {
            let authority = if route.port == 80 {
                route.host.clone()
            } else {
                format!("{}:{}", route.host, route.port)
            };
            let target = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into());
            (authority, target)
        }
    };
    parts.uri = target
        .parse()
        .map_err(|_| refuse_with(StatusCode::BAD_REQUEST, "the request target is not valid"))?;
    let host = HeaderValue::from_str(&authority)
        .map_err(|_| refuse_with(StatusCode::BAD_REQUEST, "the request host is not valid"))?;
    parts.headers.insert(HOST, host);
    Ok(Request::from_parts(parts, body))
}
