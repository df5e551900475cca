//! HTTPS for tests: a certificate authority of the test process (the daemons it starts trust it
//! for upstream connections through `HANDOFF_UPSTREAM_EXTRA_CA`, as a deployment trusts public
//! CAs) and a server on 127.0.0.1 presenting a certificate from it that records the head of
//! every request it gets and answers `ok` (or, to a git request without credentials, 401 with a
//! Basic challenge).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    file: PathBuf,
}

/// The test process's CA (its certificate written to a file once).
pub fn ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "handoff tests upstream CA");
        let pem = params.self_signed(&key).expect("CA cert").pem();
        let file = crate::scratch_dir("tls-ca").join("ca.pem");
        std::fs::write(&file, &pem).expect("write the test CA");
        TestCa {
            issuer: Issuer::new(params, key),
            pem,
            file,
        }
    })
}

impl TestCa {
    /// The file with the CA's certificate (PEM).
    pub fn file(&self) -> &PathBuf {
        &self.file
    }

    pub fn pem(&self) -> &str {
        &self.pem
    }

    fn server_config(&self, host: &str) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().expect("leaf key");
        let params = CertificateParams::new(vec![host.to_string()]).expect("leaf params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf cert");
        let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], private)
        .expect("server certificate");
        Arc::new(config)
    }
}

/// An HTTPS server on 127.0.0.1 that records request heads.
pub struct Recorder {
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let acceptor = tokio_rustls::TlsAcceptor::from(ca().server_config("127.0.0.1"));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    // Git sends the credentials of a URL only when challenged.
                    let challenge = head.contains(".git/")
                        && !head.to_ascii_lowercase().contains("\r\nauthorization:");
                    seen.lock().unwrap().push(head);
                    let reply = if challenge {
                        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    } else {
                        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
                    };
                    let _ = tls.write_all(reply.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Recorder { port, heads }
    }

    /// Every request head received so far, oldest first.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}
