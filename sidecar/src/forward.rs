//! The daemon's way to the host: an HTTP CONNECT proxy on 127.0.0.1:15000 inside the namespace
//! (root only, by the firewall) that hands each tunnel to workerd's egress service on the
//! Docker gateway (`--http-egress-port`), which connects from the host — so a sandbox in a
//! local container reaches the Worker on the host's loopback, as a Cloudflare container
//! reaches it on the internet. The daemon uses it when started with `HANDOFF_UPSTREAM_PROXY`.

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpStream;

/// Where the forwarder listens inside the namespace.
pub const ADDRESS: &str = "127.0.0.1:15000";

/// The default gateway of this namespace (the Docker bridge), from `/proc/net/route`.
pub fn gateway() -> Option<Ipv4Addr> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    routes.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&"00000000"))
            .then(|| u32::from_str_radix(fields.get(2)?, 16).ok())
            .flatten()
            .map(|g| Ipv4Addr::from(g.to_le_bytes()))
    })
}

pub async fn serve(egress: SocketAddr) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(ADDRESS)
        .await
        .map_err(|e| format!("cannot listen on {ADDRESS}: {e}"))?;
    println!("handoff-egress: forwarding tunnels on {ADDRESS} to workerd at {egress}");
    loop {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(move |req| tunnel(egress, req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

fn status(code: StatusCode) -> Response<Empty<Bytes>> {
    let mut response = Response::new(Empty::new());
    *response.status_mut() = code;
    response
}

async fn tunnel(
    egress: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Empty<Bytes>>, Infallible> {
    let target = match (req.method(), req.uri().authority()) {
        (&Method::CONNECT, Some(authority)) => authority.to_string(),
        _ => return Ok(status(StatusCode::METHOD_NOT_ALLOWED)),
    };
    let upstream = match open(egress, &target).await {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("handoff-egress: {target}: {e}");
            return Ok(status(StatusCode::BAD_GATEWAY));
        }
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let mut client = TokioIo::new(upgraded);
            let mut upstream = upstream;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    });
    Ok(status(StatusCode::OK))
}

/// A tunnel to `target` through workerd's egress service.
async fn open(
    egress: SocketAddr,
    target: &str,
) -> Result<TokioIo<hyper::upgrade::Upgraded>, String> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(egress))
        .await
        .map_err(|_| "workerd's egress service did not answer".to_string())?
        .map_err(|e| format!("workerd's egress service: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection.with_upgrades());
    let request = Request::connect(target)
        .header(hyper::header::HOST, target)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .map_err(|_| "workerd did not answer the tunnel".to_string())?
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!(
            "workerd refused the tunnel ({})",
            response.status()
        ));
    }
    hyper::upgrade::on(response)
        .await
        .map(TokioIo::new)
        .map_err(|e| e.to_string())
}
