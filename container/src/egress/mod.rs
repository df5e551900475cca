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

/// Whether `rule` names `host:port` by its name: `*`, `*.domain` or the host itself (what a
/// secret's hosts are matched with).
fn rule_matches(rule: &str, host: &str, port: u16) -> bool {
    cover(rule, host, port, &[]) != Cover::No
}

/// How a rule covers a destination.
#[derive(Debug, PartialEq)]
enum Cover {
    No,
    /// `*` or `*.domain`: public destinations only.
    Wildcard,
    /// The destination's own name, or its address (every address the name resolved to).
    Named,
}

fn cover(rule: &str, host: &str, port: u16, addrs: &[IpAddr]) -> Cover {
    let (pattern, rule_port) = rules::split_network_rule(rule);
    if rule_port.is_some_and(|p| p.parse::<u16>().ok() != Some(port)) {
        return Cover::No;
    }
    let Some(pattern) = normalize_host(pattern) else {
        return Cover::No;
    };
    if pattern == "*" {
        return Cover::Wildcard;
    }
    if let Some(domain) = pattern.strip_prefix("*.") {
        return match host.ends_with(&format!(".{domain}")) {
            true => Cover::Wildcard,
            false => Cover::No,
        };
    }
    if pattern == host {
        return Cover::Named;
    }
    // An address rule also covers other spellings of that address (`127.1`, `0x7f000001`,
    // `[::ffff:127.0.0.1]`), which the resolver turns into it.
    match pattern.parse::<IpAddr>() {
        Ok(ip) if !addrs.is_empty() && addrs.iter().all(|a| same_address(*a, ip)) => Cover::Named,
        _ => Cover::No,
    }
}

/// Whether a deny rule applies: by name, or (an address rule) when any address the name
/// resolved to is that address.
fn denies(rule: &str, host: &str, port: u16, addrs: &[IpAddr]) -> bool {
    if cover(rule, host, port, addrs) != Cover::No {
        return true;
    }
    let (pattern, rule_port) = rules::split_network_rule(rule);
    let port_ok = rule_port.is_none_or(|p| p.parse::<u16>().ok() == Some(port));
    port_ok
        && pattern
            .parse::<IpAddr>()
            .is_ok_and(|ip| addrs.iter().any(|a| same_address(*a, ip)))
}

fn same_address(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// A host as the policy compares it: lower case, without IPv6 brackets or the trailing dot of
/// a fully qualified name (`example.com.` is `example.com`); `None` when nothing is left.
pub fn normalize_host(host: &str) -> Option<String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.ends_with('.') || host.contains(['/', ' ', '@']) {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// Loopback, private, link-local (cloud metadata), unspecified and similar addresses, also
/// inside IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 addresses.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || a == 0
                || a >= 224 // multicast, reserved and broadcast
                || a == 100 && (64..128).contains(&b)
                || a == 198 && (b == 18 || b == 19)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded = match s {
                [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(std::net::Ipv4Addr::from_bits(
                    (s[6] as u32) << 16 | s[7] as u32,
                )),
                _ => v6.to_ipv4(),
            };
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || embedded.is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// The verdict for `host:port` under `spec`, given the addresses it resolves to. `denyOut`
/// wins; an `allowOut` list passes what a rule covers, except that wildcards (`*`, `*.domain`)
/// cover public destinations only: a loopback, private or link-local destination (cloud
/// metadata included) passes only under a rule that names it, by host name or address.
pub fn decide(spec: &SandboxSpec, host: &str, port: u16, addrs: &[IpAddr]) -> (Verdict, String) {
    if let Some(rule) = spec.deny_out.iter().find(|r| denies(r, host, port, addrs)) {
        return (Verdict::Blocked, format!("denied by denyOut rule {rule:?}"));
    }
    let internal = host == "localhost"
        || host.ends_with(".localhost")
        || addrs.iter().any(|ip| is_internal(*ip));
    if spec.allow_out.is_empty() {
        return match internal {
            true => (
                Verdict::Blocked,
                "loopback and private addresses are blocked unless listed in allowOut".into(),
            ),
            false => (
                Verdict::Allowed,
                "no allowOut list: public destinations are allowed".into(),
            ),
        };
    }
    let covering = |kind: Cover| {
        spec.allow_out
            .iter()
            .find(|r| cover(r, host, port, addrs) == kind)
    };
    match (covering(Cover::Named), covering(Cover::Wildcard)) {
        (Some(rule), _) => (
            Verdict::Allowed,
            format!("allowed by allowOut rule {rule:?}"),
        ),
        (None, Some(rule)) if !internal => (
            Verdict::Allowed,
            format!("allowed by allowOut rule {rule:?}"),
        ),
        (None, Some(rule)) => (
            Verdict::Blocked,
            format!(
                "a loopback or private address: the wildcard {rule:?} covers public \
                 destinations only; list the host or address itself to reach it"
            ),
        ),
        (None, None) => (
            Verdict::Blocked,
            "not in the sandbox's allowOut list".into(),
        ),
    }
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
    Ok((normalize_host(host).ok_or_else(bad)?, port))
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

    /// Wildcards are the public internet: an internal destination needs a rule naming it, and
    /// no other spelling of a name or address slips past a rule.
    #[test]
    fn wildcards_never_cover_internal_addresses_and_spellings_do_not_matter() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let verdict = |allow: &[&str], deny: &[&str], authority: &str, addrs: &[IpAddr]| {
            let (host, port) = split_host_port(authority, Some(80)).unwrap();
            decide(&spec(allow, deny), &host, port, addrs).0
        };
        use Verdict::{Allowed, Blocked};
        let public = [ip("93.184.216.34")];
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "fd00::1",
            "fe80::1",
        ] {
            let addrs = [ip(internal)];
            assert_eq!(
                verdict(&["*"], &[], "anything:8891", &addrs),
                Blocked,
                "{internal}"
            );
            assert_eq!(
                verdict(&["*:8891"], &[], "x:8891", &addrs),
                Blocked,
                "{internal}"
            );
            assert_eq!(
                verdict(&["*.example.com"], &[], "a.example.com", &addrs),
                Blocked
            );
            assert_eq!(
                verdict(&[], &[], "a.example.com", &addrs),
                Blocked,
                "{internal}"
            );
        }
        assert_eq!(verdict(&["*"], &[], "localhost", &[]), Blocked);
        assert_eq!(verdict(&["*"], &[], "example.com", &public), Allowed);
        assert_eq!(
            verdict(&["*.example.com"], &[], "a.example.com.", &public),
            Allowed
        );
        // Named, by host or by address, an internal destination passes, however it is spelt.
        let local = [ip("127.0.0.1")];
        assert_eq!(
            verdict(&["*", "localhost:3000"], &[], "LOCALHOST.:3000", &local),
            Allowed
        );
        assert_eq!(
            verdict(&["127.0.0.1:3000"], &[], "127.1:3000", &local),
            Allowed
        );
        let mapped = [ip("::ffff:127.0.0.1")];
        assert_eq!(
            verdict(&["127.0.0.1:3000"], &[], "[::ffff:127.0.0.1]:3000", &mapped),
            Allowed
        );
        // ...but an address rule covers a name only when every address it has is that one.
        let both = [ip("127.0.0.1"), ip("10.0.0.1")];
        assert_eq!(verdict(&["127.0.0.1"], &[], "two-faced", &both), Blocked);
        // A deny rule holds against a trailing dot, upper case and the address behind a name.
        assert_eq!(
            verdict(&[], &["example.com"], "EXAMPLE.com.:443", &public),
            Blocked
        );
        assert_eq!(
            verdict(&["*"], &["*.example.com"], "a.example.com.", &public),
            Blocked
        );
        assert_eq!(
            verdict(&["*"], &["93.184.216.34"], "example.com", &public),
            Blocked
        );
        assert_eq!(
            verdict(&["localhost"], &["127.0.0.1"], "localhost", &both),
            Blocked
        );
        assert_eq!(
            verdict(&["localhost"], &["127.0.0.1:81"], "localhost", &local),
            Allowed
        );
        for bad in ["", ".", "a..", "[]:80", "a b", "u@h"] {
            assert!(split_host_port(bad, Some(80)).is_err(), "{bad:?}");
        }
    }
}
