//! Connecting out of the host for a sandbox: TCP to addresses already checked against the
//! sandbox's policy, TLS (rustls, Mozilla's roots) where a credential's upstream is `https`,
//! and one HTTP/1 exchange per connection.

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

/// A TCP connection to the first of `addrs` that answers.
pub async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addrs)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err("the connection timed out".into()),
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
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
    tcp: TcpStream,
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
