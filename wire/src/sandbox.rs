//! A sandbox as the daemon's API describes it: its spec (environment, network rules, host
//! aliases, limits, secrets), the isolation and limits really in force, and its state.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What isolation this host really gives a sandbox; never claims more than it enforces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// `namespaces` (bubblewrap: own user, mount, pid, network, ipc, uts and cgroup namespaces;
    /// processes as uid 1000 without capabilities, seccomp-filtered), `container` (the
    /// container is the boundary; processes unprivileged and filtered), `unavailable` (the host
    /// cannot isolate, so nothing runs) or `none` (development only: plain host processes).
    pub level: String,
    /// How the file system looks from inside, e.g. "host /usr and /etc read-only, workspace
    /// read-write, nothing else".
    pub filesystem: String,
    /// `proxy-only` (only loopback plus the egress proxy), `open` (a container whose runtime
    /// lets sandbox processes connect out directly; the egress proxy is in their environment)
    /// or `host` (unrestricted).
    pub network: String,
    /// Resource limits actually enforced.
    pub limits: Limits,
    /// Anything weaker than the goal, in plain words.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    /// CPU in thousandths of a core.
    pub cpu_millis: Option<u64>,
    /// Disk for the workspace and the process logs together.
    #[serde(default)]
    pub disk_bytes: Option<u64>,
}

/// Configuration of a sandbox, set at creation and updatable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Environment of every process in the sandbox.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// If not empty, only these destinations are reachable (`host`, `*.domain` or `host:port`).
    #[serde(default)]
    pub allow_out: Vec<String>,
    /// Never reachable, even if allowed.
    #[serde(default)]
    pub deny_out: Vec<String>,
    /// Names the egress proxy resolves itself: `name` → `host:port` it connects to instead.
    /// Connections to these names are always allowed (they are configured, not chosen by the
    /// sandbox) and logged under the name.
    #[serde(default)]
    pub hosts: BTreeMap<String, String>,
    /// The limits asked for this sandbox (its size): memory, processes and CPU, each at most the
    /// daemon's own; what is left out is the daemon's. Disk is the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Secrets swapped in at egress: the sandbox's processes see `name` = `stand_in`; the proxy
    /// puts `value` in place of the stand-in in the headers of HTTPS requests to `hosts` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretGrant>,
}

/// A secret attached to a sandbox. The daemon keeps `value` in memory only and never reports it
/// (its state and its files carry the grant with an empty value).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretGrant {
    /// Also the environment variable holding the stand-in.
    pub name: String,
    pub stand_in: String,
    /// Empty when not known (then nothing is swapped in and the stand-in goes out as it is).
    #[serde(default)]
    pub value: String,
    /// Where the value may go: `host`, `*.domain` or either with `:port` (443 when left out).
    pub hosts: Vec<String>,
}

impl SecretGrant {
    /// The grant without its value.
    pub fn redacted(&self) -> SecretGrant {
        SecretGrant {
            value: String::new(),
            ..self.clone()
        }
    }
}

impl std::fmt::Debug for SecretGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretGrant")
            .field("name", &self.name)
            .field("stand_in", &self.stand_in)
            .field(
                "value",
                &if self.value.is_empty() {
                    ""
                } else {
                    "[redacted]"
                },
            )
            .field("hosts", &self.hosts)
            .finish()
    }
}

impl Limits {
    /// What a sandbox asking for `asked` gets under these limits: an asked value lowers the
    /// limit it names, never raises it nor adds one these limits leave open (so a report of them
    /// claims nothing unenforced); disk unchanged.
    pub fn capped(&self, asked: Option<&Limits>) -> Limits {
        let Some(asked) = asked else {
            return self.clone();
        };
        let cap = |asked: Option<u64>, base: Option<u64>| match (asked, base) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (_, b) => b,
        };
        Limits {
            memory_bytes: cap(asked.memory_bytes, self.memory_bytes),
            pids: cap(asked.pids, self.pids),
            cpu_millis: cap(asked.cpu_millis, self.cpu_millis),
            disk_bytes: self.disk_bytes,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxStatus {
    /// Processes may run.
    Running,
    /// Files kept, no processes (a fresh daemon, or after stop).
    Stopped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxState {
    pub id: String,
    pub status: SandboxStatus,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    pub workspace: String,
    pub isolation: Isolation,
    pub spec: SandboxSpec,
    pub processes: usize,
}

#[cfg(test)]
mod limits_tests {
    use super::Limits;

    #[test]
    fn a_size_lowers_limits_and_never_adds_one() {
        let host = Limits {
            memory_bytes: Some(2048),
            pids: Some(1024),
            cpu_millis: None,
            disk_bytes: Some(10),
        };
        let asked = Limits {
            memory_bytes: Some(512),
            pids: Some(4096),
            cpu_millis: Some(500),
            disk_bytes: Some(1),
        };
        let got = host.capped(Some(&asked));
        assert_eq!(
            (got.memory_bytes, got.pids, got.cpu_millis, got.disk_bytes),
            (Some(512), Some(1024), None, Some(10))
        );
        assert_eq!(host.capped(None), host);
    }
}
