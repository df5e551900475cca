//! How sandbox processes are isolated from the host and from each other.
//!
//! With namespaces (bubblewrap + nsenter): each running sandbox has one long-lived init
//! process started by `bwrap --unshare-all` (own mount, pid, network, ipc, uts and user
//! namespaces; host `/usr` and a few `/etc` files read-only; the workspace read-write at
//! `/home/sandbox`; nothing else of the host). Every command enters that init's namespaces
//! with `nsenter`, so all of a sandbox's processes share one file system view, process table
//! and network (loopback only), and no two sandboxes share any. Without namespaces, commands
//! run as plain host processes in the sandbox directory, and the daemon says so.

use handoff_wire::{Isolation, Limits, WORKSPACE};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
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

pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// The loopback port inside each sandbox where the egress proxy listens.
pub const PROXY_PORT: u16 = 3128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Namespaces,
    None,
}

/// What this host can do, found out once at start.
#[derive(Debug, Clone)]
pub struct HostIsolation {
    pub mode: Mode,
    pub report: Isolation,
}

/// Probes bubblewrap and nsenter by starting a throwaway sandbox. `require` makes a missing
/// capability an error instead of a fallback.
pub async fn detect(scratch: &Path, require: bool) -> Result<HostIsolation, String> {
    let probe_home = scratch.join(format!("probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&probe_home);
    let works = match start_init(&probe_home, &etc_files(), None, None).await {
        Ok(mut init) => {
            let entered = Command::new("nsenter")
                .args(nsenter_args(init.pid))
                .args(["/bin/sh", "-c", "test -d /home/sandbox && ! test -e /root"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await
                .map(|s| s.success())
                .unwrap_or(false);
            init.kill().await;
            entered
        }
        Err(_) => false,
    };
    let _ = std::fs::remove_dir_all(&probe_home);
    if works {
        Ok(HostIsolation {
            mode: Mode::Namespaces,
            report: Isolation {
                level: "namespaces".into(),
                filesystem: "host /usr and selected /etc files read-only, the workspace \
                             read-write at /home/sandbox, a private /tmp; nothing else of the host"
                    .into(),
                network: "proxy-only".into(),
                limits: Limits::default(),
                notes: Vec::new(),
            },
        })
    } else if require {
        Err(
            "namespace isolation was required but bubblewrap/nsenter do not work here \
             (install the bubblewrap package and run as root)"
                .into(),
        )
    } else {
        Ok(HostIsolation {
            mode: Mode::None,
            report: Isolation {
                level: "none".into(),
                filesystem: "processes run on the host as the daemon's user, in the sandbox \
                             directory; the host file system is NOT hidden"
                    .into(),
                network: "host".into(),
                limits: Limits::default(),
                notes: vec![
                    "bubblewrap namespaces are unavailable on this host: sandboxes are separate \
                     directories only, with unrestricted network"
                        .into(),
                ],
            },
        })
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

/// A running sandbox init: the bwrap process and the pid whose namespaces commands enter.
pub struct Init {
    child: Child,
    pub pid: u32,
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
}

/// Starts the init of a sandbox whose workspace is `home`. `join` puts it in a cgroup first.
pub async fn start_init(
    home: &Path,
    etc: &[PathBuf],
    tools: Option<&Path>,
    join: Option<super::cgroup::SandboxCgroup>,
) -> std::io::Result<Init> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
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
    for entry in etc {
        let entry = entry.display().to_string();
        args.extend(["--ro-bind".to_string(), entry.clone(), entry]);
    }
    if let Some(tools) = tools {
        args.extend([
            "--ro-bind".to_string(),
            tools.display().to_string(),
            handoff_wire::TOOLS_DIR.to_string(),
        ]);
    }
    args.extend([
        "--bind".to_string(),
        home.display().to_string(),
        WORKSPACE.to_string(),
        "--chdir".to_string(),
        WORKSPACE.to_string(),
    ]);
    // The options travel through a pipe (`--args 3`; bwrap wants the command itself on its
    // command line), so the sandbox's pid 1 does not show where its workspace lives on the host.
    let args_fd = args_pipe(&args)?;
    let raw = args_fd.as_raw_fd();
    let mut cmd = Command::new("bwrap");
    cmd.args(["--args", "3", "--", "/usr/bin/sleep", "infinity"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: dup2 is async-signal-safe; it leaves fd 3 open across exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    if let Some(group) = join {
        // SAFETY: `join_current_process` only makes async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || {
                group.join_current_process();
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn()?;
    drop(args_fd);
    let outer = child
        .id()
        .ok_or_else(|| std::io::Error::other("bwrap exited at once"))?;
    // bwrap (outer) -> bwrap (pid 1 of the sandbox) -> sleep: the sleep exists only once the
    // namespaces and mounts are set up, and it is the process commands enter.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = child_of(outer).and_then(child_of) {
            return Ok(Init { child, pid });
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

/// A pipe holding `args` NUL-separated, read end returned (the write end is closed).
fn args_pipe(args: &[String]) -> std::io::Result<OwnedFd> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut writer = std::fs::File::from(write);
    for arg in args {
        writer.write_all(arg.as_bytes())?;
        writer.write_all(&[0])?;
    }
    Ok(read)
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

/// `nsenter` arguments that enter every namespace of `pid`, its root and its working directory.
pub fn nsenter_args(pid: u32) -> Vec<String> {
    vec![
        "--target".into(),
        pid.to_string(),
        "--mount".into(),
        "--net".into(),
        "--pid".into(),
        "--uts".into(),
        "--ipc".into(),
        "--user".into(),
        "--preserve-credentials".into(),
        "--root".into(),
        "--wd".into(),
        "--".into(),
    ]
}

/// A shell prelude that changes to `$1` and runs the rest of the arguments, so neither the
/// directory nor the program ever becomes shell code.
pub const CD_AND_EXEC: &str = "cd -- \"$1\" || exit 126; shift; exec \"$@\"";
