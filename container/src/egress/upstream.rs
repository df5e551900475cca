//! Connecting out of the host for a sandbox: TCP to addresses already checked against the
//! sandbox's policy — directly, or through the CONNECT proxy `HANDOFF_UPSTREAM_PROXY` names
//! (a local container's way to the host: the egress sidecar) — TLS (rustls, Mozilla's roots,
//! plus those in the file `HANDOFF_UPSTREAM_EXTRA_CA` names or the PEM text in
//! `HANDOFF_UPSTREAM_EXTRA_CA_PEM`, for local and private servers)
//! where a credential's upstream is `https`, and one HTTP/1 exchange per connection.

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection out: a TCP stream, or a tunnel through the upstream proxy.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
pub type Stream = Box<dyn Io>;

/// The CONNECT proxy all connections go through, if the daemon was given one.
fn upstream_proxy() -> Option<SocketAddr> {
    static PROXY: OnceLock<Option<SocketAddr>> = OnceLock::new();
    *PROXY.get_or_init(|| {
        let raw = std::env::var("HANDOFF_UPSTREAM_PROXY").ok()?;
        let addr = raw
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/');
        addr.parse().ok()
    })
}

/// A connection to the first of `addrs` that answers.
pub async fn connect(addrs: &[SocketAddr]) -> Result<Stream, String> {
    if let Some(proxy) = upstream_proxy() {
        let target = addrs.first().ok_or("no address to connect to")?;
        return tunnel(proxy, *target).await;
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addrs)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream))
        }
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err("the connection timed out".into()),
    }
}

/// A tunnel to `target` through the CONNECT proxy at `proxy`.
async fn tunnel(proxy: SocketAddr, target: SocketAddr) -> Result<Stream, String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(proxy))
        .await
        .map_err(|_| "the upstream proxy timed out".to_string())?
        .map_err(|e| format!("the upstream proxy: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("the upstream proxy: {e}"))?;
    tokio::spawn(connection.with_upgrades());
    let authority = target.to_string();
    let request = Request::connect(authority.as_str())
        .header(hyper::header::HOST, authority.as_str())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(CONNECT_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| "the upstream proxy did not answer".to_string())?
        .map_err(|e| format!("the upstream proxy: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "the upstream proxy refused {target} ({})",
            response.status()
        ));
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| format!("the upstream proxy: {e}"))?;
    Ok(Box::new(TokioIo::new(upgraded)))
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            // Upstreams with a CA of their own: local forges and test servers (a file), or a
            // private forge of a deployment (PEM text, passed to each container).
            let mut pems = Vec::new();
            if let Ok(file) = std::env::var("HANDOFF_UPSTREAM_EXTRA_CA") {
                let pem = std::fs::read(&file)
                    .map_err(|e| format!("HANDOFF_UPSTREAM_EXTRA_CA {file}: {e}"))?;
                pems.push(("HANDOFF_UPSTREAM_EXTRA_CA", pem));
            }
            if let Ok(text) = std::env::var("HANDOFF_UPSTREAM_EXTRA_CA_PEM") {
                // `\n` as two characters too, as one-line configuration files carry it.
                let pem = text.replace("\\n", "\n").into_bytes();
                pems.push(("HANDOFF_UPSTREAM_EXTRA_CA_PEM", pem));
            }
            for (source, pem) in pems {
                use rustls::pki_types::{pem::PemObject, CertificateDer};
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert.map_err(|e| format!("{source}: {e}"))?;
                    roots.add(cert).map_err(|e| format!("{source}: {e}"))?;
                }
            }
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| format!("TLS configuration: {e}"))
        })
        .clone()
}

/// Sends `req` over `tcp` (inside TLS for `host` when `tls`) and returns the response.
pub async fn send(
    tcp: Stream,
    tls: bool,
    host: &str,
    req: Request<Incoming>,
) -> Result<Response<Incoming>, String> {
    if !tls {
        return exchange(tcp, req).await;
    }
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| format!("{host} is not a valid TLS server name"))?;
    let stream = tokio_rustls::TlsConnector::from(tls_config()?)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {host} failed: {e}"))?;
    exchange(stream, req).await
}

async fn exchange<IO>(io: IO, req: Request<Incoming>) -> Result<Response<Incoming>, String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("upstream handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
        .send_request(req)
        .await
        .map_err(|e| format!("upstream request: {e}"))
}
