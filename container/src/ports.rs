//! Ports a sandbox listens on, and HTTP proxying to one of them (previews). Listening sockets
//! are read from `/proc/<pid>/net/tcp{,6}` of the sandbox's init, which shows its network
//! namespace; connections are opened inside that namespace.

use crate::error::{ApiError, Result};
use crate::netns;
use crate::sandbox::isolation::PROXY_PORT;
use crate::sandbox::{Registry, Sandbox};
use axum::body::Body;
use axum::http::{HeaderName, Request, Response};
use handoff_wire::PortInfo;
use hyper_util::rt::TokioIo;
use std::sync::Arc;

/// Listening TCP ports inside the sandbox (the egress proxy's own port excluded).
pub async fn list(registry: &Registry, sandbox: &Arc<Sandbox>) -> Result<Vec<PortInfo>> {
    // Shared like a command: a delete or pause waits for it, and one behind a delete is refused
    // rather than start the sandbox again.
    let _shared = sandbox.gate.shared().await?;
    let running = registry.ensure_running(sandbox).await?;
    let Some(pid) = running.pid else {
        return Err(ApiError::bad_request(
            "this daemon runs sandboxes without network isolation, so their ports cannot be told \
             apart from the host's",
        ));
    };
    let mut ports = Vec::new();
    for (file, v6) in [("tcp", false), ("tcp6", true)] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).unwrap_or_default();
        ports.extend(parse_listening(&text, v6));
    }
    ports.retain(|p| p.port != PROXY_PORT);
    ports.sort_by_key(|p| (p.port, p.address.clone()));
    ports.dedup();
    Ok(ports)
}

/// Parses `/proc/net/tcp` lines in LISTEN state (`0A`).
fn parse_listening(text: &str, v6: bool) -> Vec<PortInfo> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) != Some(&"0A") {
                return None;
            }
            let (addr, port) = fields.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let address = if v6 {
                if addr.chars().all(|c| c == '0') {
                    "::".to_string()
                } else {
                    "ipv6".to_string()
                }
            } else {
                let n = u32::from_str_radix(addr, 16).ok()?;
                std::net::Ipv4Addr::from(n.to_le_bytes()).to_string()
            };
            Some(PortInfo { port, address })
        })
        .collect()
}

/// Hop-by-hop headers that must not be forwarded, plus the daemon's own credentials.
const DROP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "authorization",
];

/// Sends `req` (already rewritten to the path inside the sandbox) to `port` and streams the
/// response back.
pub async fn proxy(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    port: u16,
    path_and_query: &str,
    req: Request<Body>,
) -> Result<Response<Body>> {
    if port == 0 || port == PROXY_PORT {
        return Err(ApiError::bad_request(format!(
            "port {port} cannot be previewed"
        )));
    }
    // The gate is shared while the connection is made, not while it serves (a stream may last):
    // a delete or pause then ends the connection with the sandbox's network.
    let stream = {
        let _shared = sandbox.gate.shared().await?;
        let running = registry.ensure_running(sandbox).await?;
        netns::connect(running.pid, port).await.map_err(|e| {
            ApiError::new(
                handoff_wire::ErrorCode::PortClosed,
                format!("nothing is listening on port {port} in the sandbox ({e}); start a server there first"),
            )
        })?
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ApiError::internal(format!("preview connection: {e}")))?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut req = req;
    // A WebSocket (e.g. a live view of the desktop) is passed through once both sides agree.
    let websocket = req
        .headers()
        .get(axum::http::header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let client_upgrade = websocket.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let wait = parts
        .headers
        .get(handoff_wire::RESPONSE_TIMEOUT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(std::time::Duration::from_millis);
    let mut upstream = Request::builder().method(parts.method).uri(path_and_query);
    for (name, value) in &parts.headers {
        if !DROP.contains(&name.as_str())
            && !name.as_str().starts_with("cf-")
            && name.as_str() != handoff_wire::UPSTREAM_AUTHORIZATION
            && name.as_str() != handoff_wire::RESPONSE_TIMEOUT
        {
            upstream = upstream.header(name, value);
        }
    }
    upstream = upstream.header(HeaderName::from_static("host"), format!("127.0.0.1:{port}"));
    if websocket {
        upstream = upstream
            .header(axum::http::header::CONNECTION, "upgrade")
            .header(axum::http::header::UPGRADE, "websocket");
    }
    if let Some(value) = parts.headers.get(handoff_wire::UPSTREAM_AUTHORIZATION) {
        upstream = upstream.header(axum::http::header::AUTHORIZATION, value);
    }
    let upstream = upstream
        .body(body)
        .map_err(|e| ApiError::bad_request(format!("cannot forward this request: {e}")))?;
    let sent = sender.send_request(upstream);
    let response = match wait {
        Some(limit) => tokio::time::timeout(limit, sent).await.map_err(|_| {
            ApiError::new(
                handoff_wire::ErrorCode::Timeout,
                format!(
                    "the server on port {port} did not answer within {} ms",
                    limit.as_millis()
                ),
            )
        })?,
        None => sent.await,
    }
    .map_err(|e| ApiError::unavailable(format!("the server on port {port} did not answer: {e}")))?;
    if let (Some(client), true) = (client_upgrade, response.status().as_u16() == 101) {
        return Ok(switch(client, response));
    }
    let (mut parts, body) = response.into_parts();
    for name in DROP {
        parts.headers.remove(name);
    }
    parts.headers.remove(handoff_wire::DAEMON_ERROR);
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// Answers 101 with the server's handshake headers and joins the two upgraded connections.
fn switch(
    client: hyper::upgrade::OnUpgrade,
    mut response: hyper::Response<hyper::body::Incoming>,
) -> Response<Body> {
    let server = hyper::upgrade::on(&mut response);
    tokio::spawn(async move {
        if let (Ok(client), Ok(server)) = (client.await, server.await) {
            let (mut client, mut server) = (TokioIo::new(client), TokioIo::new(server));
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
    });
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(handoff_wire::DAEMON_ERROR);
    Response::from_parts(parts, Body::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_listeners_are_read() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 10 0\n\
   1: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 10 0\n\
   2: 0100007F:1F90 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 10 0\n";
        let ports = parse_listening(text, false);
        assert_eq!(
            ports,
            vec![
                PortInfo {
                    port: 8080,
                    address: "127.0.0.1".into()
                },
                PortInfo {
                    port: 3128,
                    address: "127.0.0.1".into()
                },
            ]
        );
    }
}
