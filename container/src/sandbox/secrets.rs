//! A sandbox's secrets as its processes meet them: each secret's stand-in in a variable of its
//! name, and — so HTTPS clients trust the certificates the egress proxy presents when it swaps
//! a secret in — the sandbox's certificate authority in the variables curl, git, Python, Node
//! (and Bun, so OpenCode) read. The values themselves stay in the daemon's memory.

use super::isolation::Mode;
use super::Sandbox;
use crate::egress::authority::{self, Authority, BUNDLE_FILE, CA_FILE};
use handoff_wire::SandboxSpec;
use std::sync::Arc;

/// Where a namespaced sandbox sees its `tls` directory.
pub const TLS_INSIDE: &str = "/etc/handoff-tls";

impl Sandbox {
    /// The directory holding the sandbox's CA certificate, as its processes see it.
    fn tls_display(&self) -> String {
        match self.mode {
            Mode::Namespaces => TLS_INSIDE.to_string(),
            _ => self.dir.join(authority::TLS_DIR).display().to_string(),
        }
    }

    /// The sandbox's certificate authority while it has secrets (made on first need).
    pub(super) fn secret_authority(&self) -> Option<Arc<Authority>> {
        if self.spec().secrets.is_empty() {
            return None;
        }
        self.open_authority()
    }

    /// The sandbox's certificate authority, made on first need.
    fn open_authority(&self) -> Option<Arc<Authority>> {
        let mut slot = self.authority.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            match Authority::open(&self.dir, &self.id) {
                Ok(made) => *slot = Some(Arc::new(made)),
                Err(e) => eprintln!("handoff-sandboxd: sandbox {}: its CA: {e}", self.id),
            }
        }
        slot.clone()
    }

    /// Variables for the sandbox's secrets: stand-ins and, with them, the CA's files.
    pub(super) fn secret_env(&self, spec: &SandboxSpec) -> Vec<(String, String)> {
        let secrets = spec.secrets.clone();
        if secrets.is_empty() || self.open_authority().is_none() {
            return Vec::new();
        }
        let tls = self.tls_display();
        let bundle = format!("{tls}/{BUNDLE_FILE}");
        let mut env: Vec<(String, String)> = [
            "SSL_CERT_FILE",
            "CURL_CA_BUNDLE",
            "REQUESTS_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "PIP_CERT",
        ]
        .into_iter()
        .map(|name| (name.to_string(), bundle.clone()))
        .collect();
        env.push(("NODE_EXTRA_CA_CERTS".into(), format!("{tls}/{CA_FILE}")));
        env.extend(secrets.into_iter().map(|g| (g.name, g.stand_in)));
        env
    }
}
