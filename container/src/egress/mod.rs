//! The egress proxy: the only way out of a sandbox's network namespace. It listens on
//! 127.0.0.1:3128 inside the sandbox, speaks HTTP forward proxying (absolute-URI requests and
//! CONNECT tunnels), applies the sandbox's allow and deny lists, connects from the host, and
//! records every destination with its verdict. This file holds the policy and the log;
//! `proxy` serves connections, `credentials` adds the Worker's scoped credentials to the
//! requests they are for, `upstream` connects out (TCP or TLS); `swap`, `authority` and
//! `intercept` put secrets in place of their stand-ins on HTTPS to the hosts they may go to.

pub mod authority;
pub(crate) mod credentials;
#[cfg(test)]
mod fuzz;
mod http;
mod intercept;
mod proxy;
mod swap;
mod upstream;

pub use authority::Authority;
pub use credentials::Credentials;
pub use proxy::spawn;

use handoff_wire::{rules, EgressEntry, SandboxSpec, Verdict};
use std::collections::VecDeque;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;

/// What the proxy needs of the sandbox it serves: the sandbox's current policy, the
/// credentials granted to its running commands, and its log. (The proxy knows nothing else of
/// sandboxes.)
pub trait Served: Send + Sync + 'static {
    fn spec(&self) -> SandboxSpec;
    fn credentials(&self) -> &Credentials;
    fn log(&self) -> &Log;
    /// The sandbox's certificate authority, when it has secrets to swap in.
    fn authority(&self) -> Option<std::sync::Arc<Authority>>;
}

/// Entries kept in memory (and read back from disk after a restart).
const LOG_KEEP: usize = 1000;

/// A sandbox's egress log: newest last in memory, appended to a JSON-lines file that is
/// rewritten with only the kept entries whenever it holds twice as many (so a sandbox opening
/// connections forever cannot fill the host's disk through it).
pub struct Log {
    file: PathBuf,
    entries: Mutex<(VecDeque<EgressEntry>, usize)>,
}

impl Log {
    pub fn open(file: PathBuf) -> Log {
        let mut entries = VecDeque::new();
        let mut lines = 0;
        if let Ok(text) = std::fs::read_to_string(&file) {
            for line in text.lines() {
                lines += 1;
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
            entries: Mutex::new((entries, lines)),
        }
    }

    pub fn record(&self, entry: EgressEntry) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, lines) = &mut *guard;
        if entries.len() == LOG_KEEP {
            entries.pop_front();
        }
        entries.push_back(entry);
        let rewrite = *lines >= 2 * LOG_KEEP;
        let mut options = std::fs::OpenOptions::new();
        options.create(true).mode(0o600);
        if rewrite {
            options.write(true).truncate(true);
        } else {
            options.append(true);
        }
        let Ok(mut f) = options.open(&self.file) else {
            return;
        };
        let written: &[EgressEntry] = if rewrite {
            entries.make_contiguous()
        } else {
            // The entry just pushed.
            entries.back().map(std::slice::from_ref).unwrap_or_default()
        };
        for e in written {
            if let Ok(line) = serde_json::to_string(e) {
                let _ = writeln!(f, "{line}");
            }
        }
        *lines = if rewrite { entries.len() } else { *lines + 1 };
    }

    /// Newest first, optionally only one verdict.
    pub fn read(&self, limit: usize, verdict: Option<Verdict>) -> Vec<EgressEntry> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .0
            .iter()
            .rev()
            .filter(|e| verdict.is_none_or(|v| e.verdict == v))
            .take(limit)
            .cloned()
            .collect()
    }
}

fn rule_matches(rule: &str, host: &str, port: u16) -> bool {
    let (pattern, rule_port) = rules::split_network_rule(rule);
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

/// `host` and `port` of an authority (`host:port`, `[v6]:port`, or `host` with `default`).
pub fn split_host_port(
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

    #[test]
    fn the_log_file_stays_bounded() {
        let file =
            std::env::temp_dir().join(format!("handoff-egress-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let log = Log::open(file.clone());
        for i in 0..(5 * LOG_KEEP) {
            log.record(EgressEntry {
                at: i as i64,
                host: "example.com".into(),
                port: 443,
                method: "CONNECT".into(),
                verdict: Verdict::Allowed,
                reason: "test".into(),
            });
        }
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 2 * LOG_KEEP, "{lines} lines");
        let reopened = Log::open(file.clone());
        let newest = reopened.read(1, None);
        assert_eq!(newest[0].at, (5 * LOG_KEEP - 1) as i64);
        assert_eq!(reopened.read(LOG_KEEP + 5, None).len(), LOG_KEEP);
        let _ = std::fs::remove_file(&file);
    }

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
}
