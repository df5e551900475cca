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
use super::init::{start_init, InitSpec};
use super::seccomp::Programs;
use handoff_wire::{Isolation, Limits, WORKSPACE};
use std::path::{Path, PathBuf};
use std::process::Stdio;
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

/// Where bubblewrap is looked for when `--bwrap` does not say (never through `PATH`).
const BWRAP_PATHS: [&str; 3] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

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

/// Finds bubblewrap by absolute path.
fn find_bwrap(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_absolute() && path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "bubblewrap was not found at {} (--bwrap needs the absolute path of bwrap)",
                path.display()
            ))
        };
    }
    BWRAP_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "bubblewrap (bwrap) is not installed: install the Debian package `bubblewrap`".into()
        })
}

/// Probes namespace isolation by starting a throwaway sandbox under `probe_uid` and running a
/// command in it that checks its user, capabilities and view of the file system.
pub async fn detect(
    scratch: &Path,
    wanted: Wanted,
    bwrap: Option<&Path>,
    probe_uid: u32,
) -> Result<HostIsolation, String> {
    let seccomp = Arc::new(Programs::build()?);
    if wanted == Wanted::Dangerous {
        return Ok(HostIsolation {
            mode: Mode::None,
            report: report(Mode::None, None),
            problem: None,
            bwrap: None,
            seccomp,
        });
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let probed = match (root, find_bwrap(bwrap)) {
        (false, _) => Err(
            "the sandbox daemon runs as an unprivileged user; it must run as root \
                           to give every sandbox its own user, namespaces and limits"
                .to_string(),
        ),
        (true, Err(e)) => Err(e),
        (true, Ok(path)) => probe(scratch, &path, probe_uid, &seccomp)
            .await
            .map(|()| path),
    };
    match (probed, wanted) {
        (Ok(path), _) => Ok(HostIsolation {
            mode: Mode::Namespaces,
            report: report(Mode::Namespaces, None),
            problem: None,
            bwrap: Some(path),
            seccomp,
        }),
        (Err(e), Wanted::Namespaces) => Err(format!("namespace isolation is required: {e}")),
        (Err(e), Wanted::Container) if root => Ok(HostIsolation {
            mode: Mode::Container,
            report: report(Mode::Container, Some(&e)),
            problem: None,
            bwrap: None,
            seccomp,
        }),
        (Err(e), Wanted::Container) => Err(format!("container isolation is required: {e}")),
        (Err(e), _) => {
            let problem = format!(
                "sandboxes cannot be isolated on this host, so none are run: {e}. Fix that, or \
                 for development only start the daemon with --dangerously-skip-isolation"
            );
            Ok(HostIsolation {
                mode: Mode::Unavailable,
                report: report(Mode::Unavailable, Some(&problem)),
                problem: Some(problem),
                bwrap: None,
                seccomp,
            })
        }
    }
}

async fn probe(
    scratch: &Path,
    bwrap: &Path,
    uid: u32,
    seccomp: &Arc<Programs>,
) -> Result<(), String> {
    let home = scratch.join(format!(".probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    std::os::unix::fs::chown(&home, Some(uid), Some(uid)).map_err(|e| e.to_string())?;
    let spec = InitSpec {
        bwrap,
        home: &home,
        etc: &etc_files(),
        tools: None,
        cgroup: None,
        host_uid: uid,
        seccomp,
    };
    let result = match start_init(&spec).await {
        Ok(mut init) => {
            let check = "test \"$(id -u)\" = 1000 && test -d /home/sandbox && ! test -e /root \
                         && grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status \
                         && grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status";
            let outcome = match init.command(
                "/bin/sh",
                &["-c".to_string(), check.to_string()],
                WORKSPACE,
                Some(seccomp.clone()),
                None,
            ) {
                Ok(mut cmd) => cmd
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output()
                    .await
                    .map_err(|e| format!("could not enter the probe sandbox: {e}"))
                    .and_then(|out| {
                        if out.status.success() {
                            Ok(())
                        } else {
                            Err(format!(
                                "the probe sandbox did not confine its process as expected ({}): {}",
                                out.status,
                                String::from_utf8_lossy(&out.stderr).trim()
                            ))
                        }
                    }),
                Err(e) => Err(format!("could not enter the probe sandbox: {e}")),
            };
            init.kill().await;
            outcome
        }
        Err(e) => Err(format!(
            "bubblewrap could not create the sandbox namespaces ({e}); user namespaces may be \
             disabled (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)"
        )),
    };
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn report(mode: Mode, note: Option<&str>) -> Isolation {
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
