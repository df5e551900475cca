//! A sandbox's own certificate authority: the egress proxy opens HTTPS to the hosts a secret
//! may go to with certificates it signs, so it can swap the secret in. The key stays on the
//! host (`ca-key.pem`, `0600`, beside the sandbox's spec); the sandbox sees the certificate
//! only, in `tls/ca.pem`, and `tls/bundle.pem` — the host's trusted roots plus it — which the
//! usual variables point at.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

const KEY_FILE: &str = "ca-key.pem";
/// The directory the sandbox may read.
pub const TLS_DIR: &str = "tls";
pub const CA_FILE: &str = "ca.pem";
pub const BUNDLE_FILE: &str = "bundle.pem";
/// The host's trusted roots, where Debian keeps them.
const HOST_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Hosts whose certificates are kept at once (a sandbox naming more starts over).
const CACHE_MAX: usize = 64;

pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    configs: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

/// The CA's parameters: the same every time, so a key read back signs as the same issuer.
fn ca_params(id: &str) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(
        DnType::CommonName,
        format!("handoff sandbox {id} egress CA"),
    );
    params
        .distinguished_name
        .push(DnType::OrganizationName, "handoff");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// The directory of the sandbox in `dir` that its processes may read (made if missing).
pub fn tls_dir(dir: &Path) -> std::io::Result<PathBuf> {
    let tls = dir.join(TLS_DIR);
    std::fs::create_dir_all(&tls)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tls, std::fs::Permissions::from_mode(0o755))?;
    Ok(tls)
}

impl Authority {
    /// The authority of the sandbox in `dir`, made (key, certificate, bundle) on first use.
    pub fn open(dir: &Path, id: &str) -> Result<Authority, String> {
        let params = ca_params(id)?;
        let key_path = dir.join(KEY_FILE);
        let tls = tls_dir(dir).map_err(|e| format!("the sandbox's tls directory: {e}"))?;
        let key = match std::fs::read_to_string(&key_path) {
            Ok(pem) => KeyPair::from_pem(&pem).map_err(|e| format!("the sandbox CA key: {e}"))?,
            Err(_) => {
                let key = KeyPair::generate().map_err(|e| e.to_string())?;
                write(&key_path, key.serialize_pem().as_bytes(), 0o600)
                    .map_err(|e| format!("writing the sandbox CA key: {e}"))?;
                key
            }
        };
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        let pem = cert.pem();
        let ca_file = tls.join(CA_FILE);
        if std::fs::read_to_string(&ca_file).ok().as_deref() != Some(pem.as_str()) {
            write(&ca_file, pem.as_bytes(), 0o644).map_err(|e| e.to_string())?;
            let mut bundle = std::fs::read(HOST_ROOTS).unwrap_or_default();
            if !bundle.is_empty() && !bundle.ends_with(b"\n") {
                bundle.push(b'\n');
            }
            bundle.extend_from_slice(pem.as_bytes());
            write(&tls.join(BUNDLE_FILE), &bundle, 0o644).map_err(|e| e.to_string())?;
        }
        Ok(Authority {
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            configs: Mutex::new(HashMap::new()),
        })
    }

    /// A TLS server configuration presenting a certificate for `host` (a name or an address).
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut configs = self.configs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = configs.get(host) {
            return Ok(config.clone());
        }
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            CertificateParams::new(vec![host.to_string()]).map_err(|e| e.to_string())?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let leaf = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), self.der.clone()], private)
        .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if configs.len() >= CACHE_MAX {
            configs.clear();
        }
        configs.insert(host.to_string(), config.clone());
        Ok(config)
    }
}
