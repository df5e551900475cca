//! A sandbox's init: bubblewrap started under the sandbox's host user, in its cgroup, with the
//! seccomp filter, unsharing every namespace (and forbidding new user namespaces); its options
//! travel through a pipe so nothing on the host's process list shows the workspace's path.
//! Commands join the namespaces of the init's child.

use super::cgroup::SandboxCgroup;
use super::confine::{Confinement, Credentials, Namespaces};
use super::isolation::{HostIsolation, SANDBOX_USER};
use super::seccomp::Programs;
use handoff_wire::WORKSPACE;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

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
    /// A host directory shown read-only at `secrets::TLS_INSIDE` (the sandbox's CA).
    pub tls: Option<&'a Path>,
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
            tls: None,
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
    if let Some(tls) = spec.tls {
        args.extend([
            "--ro-bind".to_string(),
            tls.display().to_string(),
            super::secrets::TLS_INSIDE.to_string(),
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
