//! The egress proxy: the only way out of a sandbox's network namespace. It listens on
//! 127.0.0.1:3128 inside the sandbox, speaks HTTP forward proxying (absolute-URI requests and
//! CONNECT tunnels), applies the sandbox's allow and deny lists, connects from the host, and
//! records every destination with its verdict.

use crate::error::{ApiError, Result};
use crate::sandbox::{self, Sandbox};
use handoff_wire::{EgressEntry, SandboxSpec, Verdict};
use std::collections::VecDeque;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Entries kept in memory (and read back from disk after a restart).
const LOG_KEEP: usize = 1000;
/// Largest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A sandbox's egress log: newest last in memory, appended to a JSON-lines file.
pub struct Log {
    file: PathBuf,
    entries: Mutex<VecDeque<EgressEntry>>,
}

impl Log {
    pub fn open(file: PathBuf) -> Log {
        let mut entries = VecDeque::new();
        if let Ok(text) = std::fs::read_to_string(&file) {
            for line in text.lines() {
                if let Ok(entry) = serde_json::from_str::<EgressEntry>(line) {
                    if entries.len() == LOG_KEEP {
                        entries.pop_front();
                    }
                    entries.push_back(entry);
                }
            }
        }
        Log {
            file,
            entries: Mutex::new(entries),
        }
    }

    fn record(&self, entry: EgressEntry) {
        if let Ok(line) = serde_json::to_string(&entry) {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.file)
            {
                let _ = writeln!(f, "{line}");
            }
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() == LOG_KEEP {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// Newest first, optionally only one verdict.
    pub fn read(&self, limit: usize, verdict: Option<Verdict>) -> Vec<EgressEntry> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .rev()
            .filter(|e| verdict.is_none_or(|v| e.verdict == v))
            .take(limit)
            .cloned()
            .collect()
    }
}

/// Checks the syntax of an allow/deny rule: `*`, `host`, `*.domain`, optionally `:port`.
pub fn check_rule(rule: &str) -> Result<()> {
    let (host, port) = split_rule(rule);
    let host_ok = host == "*"
        || (!host.is_empty()
            && host.len() <= 253
            && host
                .trim_start_matches("*.")
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "network rule {rule:?} is not valid: use host, *.domain or * with an optional :port"
        )))
    }
}

fn split_rule(rule: &str) -> (&str, Option<&str>) {
    // IPv6 literals come bracketed: [::1]:8080
    if let Some(rest) = rule.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            return (host, tail.strip_prefix(':'));
        }
    }
    match rule.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (rule, None),
    }
}

fn rule_matches(rule: &str, host: &str, port: u16) -> bool {
    let (pattern, rule_port) = split_rule(rule);
    if rule_port.is_some_and(|p| p.parse::<u16>().ok() != Some(port)) {
        return false;
    }
    let pattern = pattern.to_ascii_lowercase();
    pattern == "*"
        || pattern == host
        || pattern
            .strip_prefix("*.")
            .is_some_and(|domain| host.ends_with(&format!(".{domain}")))
}

/// Loopback, private, link-local (cloud metadata), unspecified and similar addresses.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1])
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// The verdict for `host:port` under `spec`, given the addresses it resolves to.
pub fn decide(spec: &SandboxSpec, host: &str, port: u16, addrs: &[IpAddr]) -> (Verdict, String) {
    if let Some(rule) = spec.deny_out.iter().find(|r| rule_matches(r, host, port)) {
        return (Verdict::Blocked, format!("denied by denyOut rule {rule:?}"));
    }
    if !spec.allow_out.is_empty() {
        return match spec.allow_out.iter().find(|r| rule_matches(r, host, port)) {
            Some(rule) => (
                Verdict::Allowed,
                format!("allowed by allowOut rule {rule:?}"),
            ),
            None => (
                Verdict::Blocked,
                "not in the sandbox's allowOut list".into(),
            ),
        };
    }
    if host == "localhost" || addrs.iter().any(|ip| is_internal(*ip)) {
        return (
            Verdict::Blocked,
            "loopback and private addresses are blocked unless listed in allowOut".into(),
        );
    }
    (
        Verdict::Allowed,
        "no allowOut list: public destinations are allowed".into(),
    )
}

/// Serves the sandbox's proxy listener until the task is aborted.
pub fn spawn(
    sandbox: Arc<Sandbox>,
    listener: std::net::TcpListener,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| ApiError::internal(format!("egress listener: {e}")))?;
    Ok(tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let sandbox = sandbox.clone();
            tokio::spawn(async move {
                let _ = serve(sandbox, client).await;
            });
        }
    }))
}

struct Head {
    method: String,
    host: String,
    port: u16,
    /// For plain HTTP: the request rewritten to origin form, ready to send upstream.
    forward: Option<Vec<u8>>,
}

async fn serve(sandbox: Arc<Sandbox>, mut client: TcpStream) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > MAX_HEAD {
            return reply(&mut client, 431, "request head too large").await;
        }
    };
    let head = match parse_head(&buf[..head_end]) {
        Ok(head) => head,
        Err(reason) => return reply(&mut client, 400, &reason).await,
    };
    let spec = sandbox.spec();
    let alias = spec.hosts.get(&head.host).cloned();
    let (connect_host, connect_port) = match &alias {
        Some(target) => match split_host_port(target, None) {
            Ok(target) => target,
            Err(reason) => return reply(&mut client, 502, &reason).await,
        },
        None => (head.host.clone(), head.port),
    };
    let addrs: Vec<SocketAddr> =
        match tokio::net::lookup_host((connect_host.as_str(), connect_port)).await {
            Ok(addrs) => addrs.collect(),
            Err(_) => Vec::new(),
        };
    let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    let (verdict, reason) = match &alias {
        Some(target) => (
            Verdict::Allowed,
            format!("configured host {} -> {target}", head.host),
        ),
        None => decide(&spec, &head.host, head.port, &ips),
    };
    sandbox.egress.record(EgressEntry {
        at: sandbox::now_ms(),
        host: head.host.clone(),
        port: head.port,
        method: head.method.clone(),
        verdict,
        reason: reason.clone(),
    });
    if verdict == Verdict::Blocked {
        return reply(
            &mut client,
            403,
            &format!("blocked by the sandbox egress policy: {reason}"),
        )
        .await;
    }
    if addrs.is_empty() {
        return reply(&mut client, 502, &format!("cannot resolve {connect_host}")).await;
    }
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addrs[..])).await
    {
        Ok(Ok(stream)) => stream,
        _ => {
            return reply(
                &mut client,
                502,
                &format!("cannot connect to {connect_host}:{connect_port}"),
            )
            .await
        }
    };
    let mut upstream = upstream;
    match head.forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            if buf.len() > head_end {
                upstream.write_all(&buf[head_end..]).await?;
            }
        }
        Some(forward) => {
            upstream.write_all(&forward).await?;
            upstream.write_all(&buf[head_end..]).await?;
        }
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    Ok(())
}

async fn reply(client: &mut TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let body = format!("{text}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Parses a proxy request head: `CONNECT host:port` or `METHOD http://host[:port]/path`.
fn parse_head(raw: &[u8]) -> std::result::Result<Head, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) if v.starts_with("HTTP/1.") => (m, t, v),
        _ => return Err(format!("not an HTTP/1 proxy request: {first:?}")),
    };
    if method == "CONNECT" {
        let (host, port) = split_host_port(target, None)?;
        return Ok(Head {
            method: method.into(),
            host,
            port,
            forward: None,
        });
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or_else(|| "this proxy forwards http:// URLs; use CONNECT for https".to_string())?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_host_port(authority, Some(80))?;
    let mut forward = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        forward.push_str(line);
        forward.push_str("\r\n");
    }
    forward.push_str("Connection: close\r\n\r\n");
    Ok(Head {
        method: method.into(),
        host,
        port,
        forward: Some(forward.into_bytes()),
    })
}

fn split_host_port(
    authority: &str,
    default: Option<u16>,
) -> std::result::Result<(String, u16), String> {
    let bad = || format!("cannot read a host and port from {authority:?}");
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        (host, tail.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| bad())?,
        None => default.ok_or_else(bad)?,
    };
    if host.is_empty() || host.contains(['/', ' ', '@']) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(allow: &[&str], deny: &[&str]) -> SandboxSpec {
        SandboxSpec {
            allow_out: allow.iter().map(|s| s.to_string()).collect(),
            deny_out: deny.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn policy_allows_public_blocks_internal_and_honours_lists() {
        let public = ["93.184.216.34".parse().unwrap()];
        let local = ["127.0.0.1".parse().unwrap()];
        let metadata = ["169.254.169.254".parse().unwrap()];
        assert_eq!(
            decide(&spec(&[], &[]), "example.com", 443, &public).0,
            Verdict::Allowed
        );
        assert_eq!(decide(&spec(&[], &[]), "x", 80, &local).0, Verdict::Blocked);
        assert_eq!(
            decide(&spec(&[], &[]), "m", 80, &metadata).0,
            Verdict::Blocked
        );
        assert_eq!(
            decide(&spec(&["127.0.0.1:8080"], &[]), "127.0.0.1", 8080, &local).0,
            Verdict::Allowed
        );
        assert_eq!(
            decide(&spec(&["127.0.0.1:8080"], &[]), "127.0.0.1", 8081, &local).0,
            Verdict::Blocked
        );
        assert_eq!(
            decide(
                &spec(&["*.github.com"], &[]),
                "api.github.com",
                443,
                &public
            )
            .0,
            Verdict::Allowed
        );
        assert_eq!(
            decide(&spec(&["*.github.com"], &[]), "github.com", 443, &public).0,
            Verdict::Blocked
        );
        assert_eq!(
            decide(&spec(&["*"], &["evil.com"]), "evil.com", 443, &public).0,
            Verdict::Blocked
        );
    }

    #[test]
    fn heads_parse_and_rewrite_to_origin_form() {
        let connect =
            parse_head(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
                .unwrap();
        assert_eq!(
            (
                connect.host.as_str(),
                connect.port,
                connect.forward.is_none()
            ),
            ("example.com", 443, true)
        );
        let get = parse_head(b"GET http://Example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n").unwrap();
        assert_eq!((get.host.as_str(), get.port), ("example.com", 80));
        let forward = String::from_utf8(get.forward.unwrap()).unwrap();
        assert!(forward.starts_with("GET /a?b=1 HTTP/1.1\r\n"), "{forward}");
        assert!(!forward.to_ascii_lowercase().contains("proxy-connection"));
        assert!(parse_head(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT nohost HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT a@b:1 HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn rules_are_checked() {
        for ok in [
            "*",
            "example.com",
            "*.example.com",
            "127.0.0.1:8080",
            "[::1]:80",
        ] {
            assert!(check_rule(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "x:0", "x:99999", "http://x"] {
            assert!(check_rule(bad).is_err(), "{bad}");
        }
    }
}
