//! The namespace's firewall: beyond loopback, only root (the sandbox daemon and this sidecar)
//! may open connections; sandbox users may use loopback — their own servers, and the daemon's
//! egress proxy on 127.0.0.1:3128 — but not this sidecar's ingress or forwarding ports. Loopback
//! means the loopback addresses, not the `lo` interface: a connection to the namespace's own
//! bridge address also travels over `lo`, and is refused like any other.

use std::process::{Command, Stdio};

/// The programs, by absolute path only, and the loopback network each guards.
const IPTABLES: [(&str, &str); 2] = [
    ("/usr/sbin/iptables", "127.0.0.0/8"),
    ("/usr/sbin/ip6tables", "::1/128"),
];

/// The rules, in order, for the OUTPUT chain of the filter table (`loopback`: the loopback
/// network of the address family).
fn rules(ingress_port: u16, loopback: &str) -> Vec<Vec<String>> {
    let port = ingress_port.to_string();
    let rule = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    // Only root may reach a sidecar port over loopback.
    let root_only = |port: &str| {
        rule(&[
            "-A",
            "OUTPUT",
            "-o",
            "lo",
            "-p",
            "tcp",
            "--dport",
            port,
            "-m",
            "owner",
            "!",
            "--uid-owner",
            "0",
            "-j",
            "REJECT",
        ])
    };
    vec![
        root_only(&port),
        root_only("15000"),
        rule(&["-A", "OUTPUT", "-o", "lo", "-d", loopback, "-j", "ACCEPT"]),
        rule(&[
            "-A",
            "OUTPUT",
            "-m",
            "owner",
            "--uid-owner",
            "0",
            "-j",
            "ACCEPT",
        ]),
        rule(&[
            "-A",
            "OUTPUT",
            "-m",
            "conntrack",
            "--ctstate",
            "ESTABLISHED,RELATED",
            "-j",
            "ACCEPT",
        ]),
        rule(&["-A", "OUTPUT", "-j", "REJECT"]),
    ]
}

/// Installs the rules for IPv4 and IPv6.
pub fn install(ingress_port: u16) -> Result<(), String> {
    for (program, loopback) in IPTABLES {
        for rule in rules(ingress_port, loopback) {
            let out = Command::new(program)
                .args(&rule)
                .env_clear()
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("{program}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{program} {}: {}",
                    rule.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    Ok(())
}
