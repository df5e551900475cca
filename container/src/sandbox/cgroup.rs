//! Per-sandbox resource limits with cgroups (v1 controllers or the v2 unified hierarchy,
//! whichever this host mounts writable). Each sandbox gets its own group; every process the
//! daemon starts for it joins that group before it runs. Limits that cannot be written are
//! reported as not enforced, never claimed.

use handoff_wire::Limits;
use std::ffi::CString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

const V1_ROOT: &str = "/sys/fs/cgroup";
const GROUP: &str = "handoff";
const CPU_PERIOD_US: u64 = 100_000;

#[derive(Debug, Clone)]
enum Layout {
    /// One directory per controller: `/sys/fs/cgroup/<controller>/handoff/<id>`.
    V1,
    /// `/sys/fs/cgroup/handoff/<id>`.
    V2,
}

#[derive(Debug, Clone)]
pub struct Cgroups {
    layout: Layout,
    wanted: Limits,
    /// What the start-up probe could really set.
    enforced: Limits,
}

/// One sandbox's group(s).
#[derive(Debug, Clone, Default)]
pub struct SandboxCgroup {
    dirs: Vec<PathBuf>,
    /// The files a process joins the group through, as C strings ready for `pre_exec`: v1's
    /// `tasks` (see [`SandboxCgroup::join_current_process`]), else `cgroup.procs`.
    procs: Vec<CString>,
    /// Whether `procs` are v1 `tasks` files, which take `0` for the calling thread.
    by_thread: bool,
    pub enforced: Limits,
}

impl Cgroups {
    /// Detects a writable hierarchy; `None` when this host allows no cgroup limits.
    pub fn detect(wanted: Limits) -> Option<Cgroups> {
        let root = Path::new(V1_ROOT);
        let layout = if root.join("cgroup.controllers").exists() {
            Layout::V2
        } else if root.join("memory").is_dir() || root.join("pids").is_dir() {
            Layout::V1
        } else {
            return None;
        };
        let mut cgroups = Cgroups {
            layout,
            wanted,
            enforced: Limits::default(),
        };
        let probe = format!("probe-{}", std::process::id());
        let group = cgroups.create(&probe, None).ok()?;
        group.remove();
        cgroups.enforced = group.enforced.clone();
        (!group.dirs.is_empty()).then_some(cgroups)
    }

    /// The limits every sandbox gets on this host.
    pub fn enforced(&self) -> &Limits {
        &self.enforced
    }

    fn controllers(&self) -> Vec<(&'static str, PathBuf)> {
        match self.layout {
            Layout::V1 => ["memory", "pids", "cpu"]
                .into_iter()
                .map(|c| (c, Path::new(V1_ROOT).join(c).join(GROUP)))
                .filter(|(c, _)| Path::new(V1_ROOT).join(c).is_dir())
                .collect(),
            Layout::V2 => vec![("unified", Path::new(V1_ROOT).join(GROUP))],
        }
    }

    /// Creates the sandbox's group and writes its limits: the host's, or those `asked` for the
    /// sandbox (its size) capped at the host's.
    pub fn create(&self, id: &str, asked: Option<&Limits>) -> io::Result<SandboxCgroup> {
        let wanted = self.wanted.capped(asked);
        let mut group = SandboxCgroup {
            by_thread: matches!(self.layout, Layout::V1),
            ..SandboxCgroup::default()
        };
        for (controller, parent) in self.controllers() {
            fs::create_dir_all(&parent)?;
            if let Layout::V2 = self.layout {
                let _ = fs::write(
                    Path::new(V1_ROOT).join("cgroup.subtree_control"),
                    "+memory +pids +cpu",
                );
                let _ = fs::write(parent.join("cgroup.subtree_control"), "+memory +pids +cpu");
            }
            let dir = parent.join(id);
            if !dir.exists() {
                fs::create_dir(&dir)?;
            }
            self.write_limits(&wanted, controller, &dir, &mut group.enforced);
            let procs = dir.join(if group.by_thread {
                "tasks"
            } else {
                "cgroup.procs"
            });
            if let Ok(c) = CString::new(procs.to_string_lossy().as_bytes()) {
                group.procs.push(c);
            }
            group.dirs.push(dir);
        }
        Ok(group)
    }

    fn write_limits(&self, w: &Limits, controller: &str, dir: &Path, enforced: &mut Limits) {
        let ok = |file: &str, value: String| fs::write(dir.join(file), value).is_ok();
        match (controller, &self.layout) {
            ("memory", Layout::V1) => {
                if let Some(m) = w.memory_bytes {
                    if ok("memory.limit_in_bytes", m.to_string()) {
                        enforced.memory_bytes = Some(m);
                    }
                }
            }
            ("pids", Layout::V1) => {
                if let Some(p) = w.pids {
                    if ok("pids.max", p.to_string()) {
                        enforced.pids = Some(p);
                    }
                }
            }
            ("cpu", Layout::V1) => {
                if let Some(c) = w.cpu_millis {
                    let quota = c * CPU_PERIOD_US / 1000;
                    if ok("cpu.cfs_period_us", CPU_PERIOD_US.to_string())
                        && ok("cpu.cfs_quota_us", quota.to_string())
                    {
                        enforced.cpu_millis = Some(c);
                    }
                }
            }
            (_, Layout::V2) => {
                if let Some(m) = w.memory_bytes {
                    if ok("memory.max", m.to_string()) {
                        enforced.memory_bytes = Some(m);
                    }
                }
                if let Some(p) = w.pids {
                    if ok("pids.max", p.to_string()) {
                        enforced.pids = Some(p);
                    }
                }
                if let Some(c) = w.cpu_millis {
                    let quota = c * CPU_PERIOD_US / 1000;
                    if ok("cpu.max", format!("{quota} {CPU_PERIOD_US}")) {
                        enforced.cpu_millis = Some(c);
                    }
                }
            }
            _ => {}
        }
    }
}

impl SandboxCgroup {
    /// Moves the calling process into the group. Called in `pre_exec`, between fork and exec,
    /// so it only uses raw system calls and preallocated strings.
    ///
    /// On cgroup v1 the forked child — one thread — writes `0` (itself) to `tasks`: moving one
    /// thread skips the kernel's global threadgroup lock that writing a pid to `cgroup.procs`
    /// takes, which waits out an RCU grace period once the lock has been idle. Measured here:
    /// 0.4 ms against 9–15 ms per move after a pause, paid by every command a sandbox starts
    /// (`cargo xtask bench sandboxes`: an exec 1 s after the last).
    pub fn join_current_process(&self) {
        // SAFETY: async-signal-safe calls only (getpid, open, write, close) on preallocated data.
        unsafe {
            let mut digits = [0u8; 20];
            let mut len = 0;
            let mut n = if self.by_thread {
                0
            } else {
                libc::getpid() as u64
            };
            loop {
                digits[len] = b'0' + (n % 10) as u8;
                len += 1;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            digits[..len].reverse();
            for path in &self.procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, digits.as_ptr().cast(), len);
                    libc::close(fd);
                }
            }
        }
    }

    /// Removes the (empty) groups.
    pub fn remove(&self) {
        for dir in &self.dirs {
            let _ = fs::remove_dir(dir);
        }
    }
}
