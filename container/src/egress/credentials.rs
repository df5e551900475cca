//! The credentials a sandbox's egress proxy adds to requests, each for as long as the command
//! it came with runs. A credential applies to plain-HTTP requests whose URL starts with its
//! prefix, compared after normalising scheme, host and port; paths with dot segments or encoded
//! separators never match (nor pass the proxy at all).

use crate::error::{ApiError, Result};
use handoff_wire::EgressCredential;
use hyper::http::uri::Uri;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A credential in effect, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    /// `http://host:port/path/` (normalised).
    prefix: String,
    /// Where matching requests go: scheme, host, port and base path.
    pub upstream: Target,
    pub header_name: hyper::header::HeaderName,
    pub header_value: hyper::header::HeaderValue,
}

/// An upstream base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Starts and ends with `/`.
    pub path: String,
}

/// The credentials of one sandbox.
#[derive(Default)]
pub struct Credentials {
    next: AtomicU64,
    active: Mutex<Vec<(u64, Arc<Active>)>>,
}

/// Keeps credentials in effect; dropping it withdraws them.
pub struct Grant {
    owner: Option<Arc<Credentials>>,
    ids: Vec<u64>,
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(owner) = &self.owner {
            let mut active = owner.active.lock().unwrap_or_else(|p| p.into_inner());
            active.retain(|(id, _)| !self.ids.contains(id));
        }
    }
}

impl Credentials {
    /// Puts `credentials` in effect until the returned grant is dropped.
    pub fn grant(self: &Arc<Self>, credentials: &[EgressCredential]) -> Result<Grant> {
        let parsed = credentials.iter().map(parse).collect::<Result<Vec<_>>>()?;
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids = Vec::new();
        for credential in parsed {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            active.push((id, Arc::new(credential)));
            ids.push(id);
        }
        Ok(Grant {
            owner: (!ids.is_empty()).then(|| self.clone()),
            ids,
        })
    }

    /// The credential for a request to `http://host:port` + `path_and_query`, if one applies.
    pub fn matching(&self, host: &str, port: u16, path: &str) -> Option<(Arc<Active>, String)> {
        if !clean_path(path) {
            return None;
        }
        let url = format!("http://{host}:{port}{path}");
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        active.iter().find_map(|(_, credential)| {
            let rest = url.strip_prefix(&credential.prefix)?;
            Some((
                credential.clone(),
                format!("{}{rest}", credential.upstream.path),
            ))
        })
    }
}

/// Whether a request path is free of dot segments, encoded slashes or dots and backslashes —
/// anything a server might resolve differently from a plain prefix comparison.
pub fn clean_path(path_and_query: &str) -> bool {
    let path = path_and_query.split('?').next().unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    path.starts_with('/')
        && !path.contains('\\')
        && !lower.contains("%2e")
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
}

fn bad(what: &str, value: &str) -> ApiError {
    ApiError::bad_request(format!("egress credential {what} {value:?} is not valid"))
}

fn parse_url(url: &str, what: &str, allow_tls: bool) -> Result<Target> {
    let uri: Uri = url.parse().map_err(|_| bad(what, url))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") if allow_tls => true,
        _ => return Err(bad(what, url)),
    };
    let authority = uri.authority().ok_or_else(|| bad(what, url))?;
    if authority.as_str().contains('@') {
        return Err(bad(what, url));
    }
    let host = authority
        .host()
        .trim_matches(['[', ']'])
        .to_ascii_lowercase();
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let path = uri.path();
    if !path.ends_with('/') || uri.query().is_some() || !clean_path(path) || host.is_empty() {
        return Err(bad(what, url));
    }
    Ok(Target {
        tls,
        host,
        port,
        path: path.to_string(),
    })
}

fn parse(credential: &EgressCredential) -> Result<Active> {
    let prefix = parse_url(&credential.prefix, "prefix", false)?;
    let upstream = parse_url(&credential.upstream, "upstream", true)?;
    let (name, value) = credential
        .header
        .split_once(':')
        .ok_or_else(|| ApiError::bad_request("an egress credential header is `Name: value`"))?;
    let header_name = hyper::header::HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| ApiError::bad_request("an egress credential header name is not valid"))?;
    let mut header_value = hyper::header::HeaderValue::from_str(value.trim())
        .map_err(|_| ApiError::bad_request("an egress credential header value is not valid"))?;
    header_value.set_sensitive(true);
    Ok(Active {
        prefix: format!("http://{}:{}{}", prefix.host, prefix.port, prefix.path),
        upstream,
        header_name,
        header_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(prefix: &str, upstream: &str) -> EgressCredential {
        EgressCredential {
            prefix: prefix.into(),
            upstream: upstream.into(),
            header: "Authorization: Bearer t".into(),
        }
    }

    #[test]
    fn credentials_apply_to_their_prefix_only_and_only_while_granted() {
        let all = Arc::new(Credentials::default());
        let grant = all
            .grant(&[credential(
                "http://Worker.internal/proxy/git/a/b.git/",
                "https://handoff.example.com/proxy/git/a/b.git/",
            )])
            .unwrap();
        let (found, path) = all
            .matching(
                "worker.internal",
                80,
                "/proxy/git/a/b.git/info/refs?service=x",
            )
            .unwrap();
        assert_eq!(path, "/proxy/git/a/b.git/info/refs?service=x");
        assert!(found.upstream.tls);
        assert_eq!(found.upstream.port, 443);
        for (host, port, path) in [
            ("worker.internal", 80, "/proxy/git/a/other.git/info/refs"),
            ("worker.internal", 8080, "/proxy/git/a/b.git/info/refs"),
            ("evil.example", 80, "/proxy/git/a/b.git/info/refs"),
            (
                "worker.internal",
                80,
                "/proxy/git/a/b.git/../../anthropic/v1/messages",
            ),
            ("worker.internal", 80, "/proxy/git/a/b.git/%2e%2e/x"),
            ("worker.internal", 80, "/proxy/git/a/b.git%2f..%2fx"),
        ] {
            assert!(
                all.matching(host, port, path).is_none(),
                "{host}:{port}{path}"
            );
        }
        drop(grant);
        assert!(all
            .matching("worker.internal", 80, "/proxy/git/a/b.git/info/refs")
            .is_none());
    }

    #[test]
    fn malformed_credentials_are_refused() {
        let all = Arc::new(Credentials::default());
        for (prefix, upstream) in [
            ("https://x/a/", "https://x/a/"),
            ("http://x/a", "https://x/a/"),
            ("http://u@x/a/", "https://x/a/"),
            ("http://x/a/../", "https://x/a/"),
            ("http://x/a/", "ftp://x/a/"),
        ] {
            assert!(
                all.grant(&[credential(prefix, upstream)]).is_err(),
                "{prefix}"
            );
        }
        let mut bad_header = credential("http://x/a/", "http://x/a/");
        bad_header.header = "no colon".into();
        assert!(all.grant(&[bad_header]).is_err());
    }
}
