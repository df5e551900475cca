//! How sandbox processes are isolated from the host and from each other.
//!
//! With namespaces (the default, and the only level that runs sandboxes unless told
//! otherwise): each running sandbox has one long-lived init started by bubblewrap under the
//! sandbox's own unprivileged host user — own user, mount, pid, network, ipc, uts and cgroup
//! namespaces, no further user namespaces, host `/usr` and a few `/etc` files read-only, the
//! workspace read-write at `/home/sandbox`, nothing else of the host. Every command joins that
//! init's namespaces in `confine` (no `nsenter`, no host program with the caller's
//! environment) and runs as uid 1000 without capabilities, with `no_new_privs` and the seccomp
//! filter.
//!
//! `container`: when namespaces cannot be made (a container engine's seccomp profile, say),
//! the container is the sandbox's only boundary and processes run as the sandbox user, without
//! capabilities, under the same filter. `none` exists for development only and is named so.
//! When namespaces are wanted but missing, the daemon starts (to report it) but refuses to run
//! anything, naming what is missing.

use super::confine::Credentials;
use super::seccomp::Programs;
use handoff_wire::{Isolation, Limits};
use std::path::{Path, PathBuf};

use std::sync::Arc;

/// Files of the host's /etc a sandbox may read (name resolution, CA certificates, locale,
/// Debian's alternatives); everything else of /etc stays hidden.
const ETC_ENTRIES: [&str; 12] = [
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "protocols",
    "services",
    "gitconfig",
];

pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// The loopback port inside each sandbox where the egress proxy listens.
pub const PROXY_PORT: u16 = 3128;
/// The user every sandbox process is inside its namespaces.
pub const SANDBOX_USER: Credentials = Credentials {
    uid: 1000,
    gid: 1000,
};

/// The isolation asked for on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Namespaces; without them, refuse to run sandboxes (but start, and say why).
    Auto,
    /// Namespaces; without them, refuse to start.
    Namespaces,
    /// Namespaces if possible, else the container is the boundary.
    Container,
    /// No isolation at all: development only.
    Dangerous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Namespaces,
    /// Processes run unprivileged, directly in the (dedicated) container.
    Container,
    /// Plain processes: development only.
    None,
    /// Nothing may run: the reason is in `HostIsolation::problem`.
    Unavailable,
}

/// What this host can do, found out once at start.
#[derive(Clone)]
pub struct HostIsolation {
    pub mode: Mode,
    pub report: Isolation,
    /// Why nothing may run (mode `Unavailable`).
    pub problem: Option<String>,
    pub(super) bwrap: Option<PathBuf>,
    pub seccomp: Arc<Programs>,
}

impl HostIsolation {
    /// Refuses to run anything when isolation is unavailable.
    pub fn usable(&self) -> Result<(), String> {
        match &self.problem {
            Some(problem) => Err(problem.clone()),
            None => Ok(()),
        }
    }
}

pub(super) fn report(mode: Mode, note: Option<&str>) -> Isolation {
    let (level, filesystem, network) = match mode {
        Mode::Namespaces => (
            "namespaces",
            "host /usr and selected /etc files read-only, the workspace read-write at \
             /home/sandbox, a private /tmp; nothing else of the host. Processes run as uid 1000 \
             without capabilities, with no_new_privs and a seccomp filter",
            "proxy-only",
        ),
        Mode::Container => (
            "container",
            "the container is the boundary: processes run as the sandbox's unprivileged user \
             without capabilities, with no_new_privs and a seccomp filter, and see the \
             container's file system",
            // Measured per check (see `direct.rs`).
            "open",
        ),
        Mode::None => (
            "none",
            "NO ISOLATION (--dangerously-skip-isolation): processes run on the host in the \
             sandbox directory and the host file system is NOT hidden",
            "host",
        ),
        Mode::Unavailable => ("unavailable", "no sandbox processes are run", "none"),
    };
    let mut notes: Vec<String> = note.map(|n| vec![n.to_string()]).unwrap_or_default();
    if mode == Mode::None {
        notes.push(
            "development only: commands run as plain host processes with unrestricted network"
                .into(),
        );
    }
    Isolation {
        level: level.into(),
        filesystem: filesystem.into(),
        network: network.into(),
        limits: Limits::default(),
        notes,
    }
}

/// The /etc entries that exist on this host.
pub fn etc_files() -> Vec<PathBuf> {
    ETC_ENTRIES
        .iter()
        .map(|e| Path::new("/etc").join(e))
        .filter(|p| p.exists())
        .collect()
}
impl super::Registry {
    /// What is really enforced for this registry's sandboxes: the host's report, with what
    /// the container's network, the disk volumes and the cgroups measured added.
    pub fn isolation(&self) -> Isolation {
        let mut report = self.host.report.clone();
        if self.host.mode == Mode::Container {
            if self.direct.blocked_for(self.uid_base) {
                report.network = "proxy-only".into();
            } else {
                report.network = "open".into();
                report.notes.push(
                    "sandbox processes can open connections beyond the container directly: the \
                     egress proxy (its rules and log) applies only to programs that use the \
                     proxy settings in their environment"
                        .into(),
                );
            }
        }
        match (&self.volumes, &self.volumes_missing) {
            (Some(v), _) => report.limits.disk_bytes = Some(v.volumes.size_bytes),
            (None, Some(why)) => report
                .notes
                .push(format!("no per-sandbox disk quota: {why}")),
            (None, None) => {}
        }
        if let Some(c) = &self.cgroups {
            let disk = report.limits.disk_bytes;
            report.limits = c.enforced().clone();
            report.limits.disk_bytes = disk;
        } else {
            report.notes.push(
                "no writable cgroup hierarchy: memory, process and CPU limits are not enforced"
                    .into(),
            );
        }
        report
    }
}
