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

use super::cgroup::SandboxCgroup;
use super::confine::{Confinement, Credentials, Namespaces};
use super::seccomp::Programs;
use handoff_wire::{Isolation, Limits, WORKSPACE};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

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
    bwrap: Option<PathBuf>,
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
            "container",
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

/// What a sandbox init is started from.
pub struct InitSpec<'a> {
    pub bwrap: &'a Path,
    pub home: &'a Path,
    pub etc: &'a [PathBuf],
    pub tools: Option<&'a Path>,
    pub cgroup: Option<SandboxCgroup>,
    /// The host user the whole sandbox runs as.
    pub host_uid: u32,
    pub seccomp: &'a Arc<Programs>,
}

impl HostIsolation {
    /// The spec for starting an init on this host (namespaces mode only).
    pub fn init_spec<'a>(
        &'a self,
        home: &'a Path,
        etc: &'a [PathBuf],
        tools: Option<&'a Path>,
        cgroup: Option<SandboxCgroup>,
        host_uid: u32,
    ) -> Option<InitSpec<'a>> {
        Some(InitSpec {
            bwrap: self.bwrap.as_deref()?,
            home,
            etc,
            tools,
            cgroup,
            host_uid,
            seccomp: &self.seccomp,
        })
    }
}

/// A running sandbox init: the bwrap process and the namespaces commands join.
pub struct Init {
    child: Child,
    pub pid: u32,
    pub namespaces: Arc<Namespaces>,
}

impl Init {
    pub async fn kill(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: the group was created for this child by `process_group(0)`.
            unsafe {
                libc::killpg(pid as i32, libc::SIGKILL);
            }
        }
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
    }

    /// Whether the init is still there.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A command that runs `program` inside this sandbox as the sandbox user.
    pub fn command(
        &self,
        program: &str,
        args: &[String],
        cwd: &str,
        seccomp: Option<Arc<Programs>>,
        cgroup: Option<SandboxCgroup>,
    ) -> std::io::Result<Command> {
        confined(
            program,
            args,
            Confinement::prepare(
                cgroup,
                Some(self.namespaces.clone()),
                Some(SANDBOX_USER),
                seccomp,
                cwd,
            )?,
        )
    }
}

/// A command whose child applies `confinement` before it runs `program` (found on the
/// command's own `PATH`, inside the confinement), with an empty environment to start from.
pub fn confined(
    program: &str,
    args: &[String],
    confinement: Confinement,
) -> std::io::Result<Command> {
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().process_group(0);
    // SAFETY: `apply` only makes async-signal-safe system calls on prepared data.
    unsafe {
        cmd.pre_exec(move || confinement.apply());
    }
    Ok(cmd)
}

/// Descriptor numbers handed to bubblewrap.
const ARGS_FD: RawFd = 3;
const SECCOMP_FD: RawFd = 4;

/// Starts the init of a sandbox: bubblewrap under the sandbox's host user, in its cgroup.
pub async fn start_init(spec: &InitSpec<'_>) -> std::io::Result<Init> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/etc",
        "--hostname",
        "sandbox",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for entry in spec.etc {
        let entry = entry.display().to_string();
        args.extend(["--ro-bind".to_string(), entry.clone(), entry]);
    }
    if let Some(tools) = spec.tools {
        args.extend([
            "--ro-bind".to_string(),
            tools.display().to_string(),
            handoff_wire::TOOLS_DIR.to_string(),
        ]);
    }
    args.extend([
        "--bind".to_string(),
        spec.home.display().to_string(),
        WORKSPACE.to_string(),
        "--chdir".to_string(),
        WORKSPACE.to_string(),
    ]);
    let programs = spec.seccomp.as_bytes();
    let mut pass: Vec<(OwnedFd, RawFd)> = Vec::new();
    for (i, bytes) in programs.iter().enumerate() {
        let fd = SECCOMP_FD + i as RawFd;
        args.extend(["--add-seccomp-fd".to_string(), fd.to_string()]);
        pass.push((filled_pipe(bytes)?, fd));
    }
    // The options travel through a pipe (`--args 3`; bwrap wants the command itself on its
    // command line), so the sandbox's pid 1 does not show where its workspace lives on the host.
    let mut joined = Vec::new();
    for arg in &args {
        joined.extend_from_slice(arg.as_bytes());
        joined.push(0);
    }
    pass.push((filled_pipe(&joined)?, ARGS_FD));
    let bwrap = spec.bwrap.display().to_string();
    let confinement = Confinement::prepare(
        spec.cgroup.clone(),
        None,
        Some(Credentials {
            uid: spec.host_uid,
            gid: spec.host_uid,
        }),
        None,
        "/",
    )?;
    let raw: Vec<(RawFd, RawFd)> = pass.iter().map(|(fd, to)| (fd.as_raw_fd(), *to)).collect();
    let mut cmd = Command::new(&bwrap);
    cmd.args(["--args", "3", "--", "/usr/bin/sleep", "infinity"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: dup2 and `apply` are async-signal-safe; the sources are above every target
    // (`filled_pipe` places them there), so no dup2 overwrites a source still to be copied.
    unsafe {
        cmd.pre_exec(move || {
            for (from, to) in &raw {
                if libc::dup2(*from, *to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            confinement.apply()
        });
    }
    let mut child = cmd.spawn()?;
    drop(pass);
    let outer = child
        .id()
        .ok_or_else(|| std::io::Error::other("bwrap exited at once"))?;
    // bwrap (outer) -> bwrap (pid 1 of the sandbox) -> sleep: the sleep exists only once the
    // namespaces and mounts are set up, and it is the process commands join.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = child_of(outer).and_then(child_of) {
            if let Ok(namespaces) = Namespaces::of(pid) {
                return Ok(Init {
                    child,
                    pid,
                    namespaces: Arc::new(namespaces),
                });
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = stderr.read_to_string(&mut err).await;
            }
            return Err(std::io::Error::other(format!(
                "bwrap exited ({status}): {}",
                err.trim()
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill().await;
            return Err(std::io::Error::other(
                "the sandbox did not start within 10 s",
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A pipe holding `bytes`, read end returned at a descriptor number above those handed to
/// bubblewrap (the write end is closed).
fn filled_pipe(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut writer = std::fs::File::from(write);
    writer.write_all(bytes)?;
    drop(writer);
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
    let high = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 64) };
    if high < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new, owned descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
}

/// The first child of `pid`, from `/proc/<pid>/task/<pid>/children`.
fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
