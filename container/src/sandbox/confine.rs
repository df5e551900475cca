//! Confining a process between `fork` and `exec`: everything a sandbox process runs under is
//! applied here, in the child, before the program starts — so no code of the caller ever runs
//! with the daemon's privileges, environment or view of the host.
//!
//! In order: join the sandbox's cgroup; drop supplementary groups (before entering a user
//! namespace, where `setgroups` is no longer allowed); enter the sandbox's namespaces (user
//! last) and its root; empty the capability bounding and ambient sets; switch to the sandbox
//! user; clear every capability; set `no_new_privs`; install the seccomp filters; change to
//! the working directory. Entering a pid namespace takes one more `fork`: the process that did
//! the entering stays outside, waits for the command and exits the way it did.
//!
//! Everything is prepared by [`Confinement::prepare`] in the parent; [`Confinement::apply`]
//! only makes system calls on that data (no allocation), as code between `fork` and `exec`
//! must.

use super::cgroup::SandboxCgroup;
use super::seccomp::Programs;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

/// Namespaces entered, in this order; the user namespace always comes last, because the other
/// namespaces belong to its parent and joining it first would give up the right to enter them.
const NAMESPACES: [(&str, libc::c_int); 6] = [
    ("net", libc::CLONE_NEWNET),
    ("uts", libc::CLONE_NEWUTS),
    ("ipc", libc::CLONE_NEWIPC),
    ("cgroup", libc::CLONE_NEWCGROUP),
    ("pid", libc::CLONE_NEWPID),
    ("mnt", libc::CLONE_NEWNS),
];

/// The namespaces and root of a running sandbox, opened from its init process.
pub struct Namespaces {
    entered: Vec<(OwnedFd, libc::c_int)>,
    user: Option<OwnedFd>,
    root: OwnedFd,
    /// Whether a pid namespace is entered (and the extra `fork` is needed).
    pid: bool,
}

impl Namespaces {
    /// Opens the namespaces of `pid` that differ from the daemon's own.
    pub fn of(pid: u32) -> io::Result<Namespaces> {
        let differs = |name: &str| -> io::Result<Option<OwnedFd>> {
            let theirs = File::open(format!("/proc/{pid}/ns/{name}"))?;
            let ours = std::fs::metadata(format!("/proc/self/ns/{name}"))?;
            let same = theirs.metadata()?.ino() == ours.ino();
            Ok((!same).then(|| theirs.into()))
        };
        let mut entered = Vec::new();
        let mut pid_ns = false;
        for (name, flag) in NAMESPACES {
            if let Some(fd) = differs(name)? {
                pid_ns |= flag == libc::CLONE_NEWPID;
                entered.push((fd, flag));
            }
        }
        let user = differs("user")?;
        let root = File::open(format!("/proc/{pid}/root"))?.into();
        Ok(Namespaces {
            entered,
            user,
            root,
            pid: pid_ns,
        })
    }
}

/// User and group a confined process runs as (in the namespace it entered, if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
}

/// Everything applied to one child before it runs its program.
pub struct Confinement {
    cgroup: Option<SandboxCgroup>,
    namespaces: Option<Arc<Namespaces>>,
    credentials: Option<Credentials>,
    seccomp: Option<Filters>,
    cwd: CString,
}

/// The seccomp programs, with the `sock_fprog` headers that point into them.
struct Filters {
    _programs: Arc<Programs>,
    headers: Vec<libc::sock_fprog>,
}

// SAFETY: the headers point into `_programs`, which the same value keeps alive and never
// changes; they are only read.
unsafe impl Send for Filters {}
unsafe impl Sync for Filters {}

impl Confinement {
    pub fn prepare(
        cgroup: Option<SandboxCgroup>,
        namespaces: Option<Arc<Namespaces>>,
        credentials: Option<Credentials>,
        seccomp: Option<Arc<Programs>>,
        cwd: &str,
    ) -> io::Result<Confinement> {
        let seccomp = seccomp.map(|programs| {
            let headers = programs
                .programs
                .iter()
                .map(|p| libc::sock_fprog {
                    len: p.len() as u16,
                    filter: p.as_ptr() as *mut libc::sock_filter,
                })
                .collect();
            Filters {
                _programs: programs,
                headers,
            }
        });
        Ok(Confinement {
            cgroup,
            namespaces,
            credentials,
            seccomp,
            cwd: CString::new(cwd).map_err(|_| io::ErrorKind::InvalidInput)?,
        })
    }

    /// Applies the confinement to the calling process.
    ///
    /// # Safety
    /// Only to be called in a freshly forked child before `exec` (a `pre_exec` hook): it
    /// changes the process's namespaces and credentials and may fork.
    pub unsafe fn apply(&self) -> io::Result<()> {
        if let Some(group) = &self.cgroup {
            group.join_current_process();
        }
        let root = libc::geteuid() == 0;
        if root {
            check(libc::setgroups(0, std::ptr::null()))?;
        }
        if let Some(ns) = &self.namespaces {
            for (fd, flag) in &ns.entered {
                check(libc::setns(fd.as_raw_fd(), *flag))?;
            }
            if let Some(user) = &ns.user {
                check(libc::setns(user.as_raw_fd(), libc::CLONE_NEWUSER))?;
            }
            check(libc::fchdir(ns.root.as_raw_fd()))?;
            check(libc::chroot(c".".as_ptr()))?;
        }
        if let Some(creds) = self.credentials {
            // The bounding set can only be emptied while CAP_SETPCAP is held, i.e. before the
            // switch of user; without privileges there is nothing in it to fear.
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            check(libc::setresgid(creds.gid, creds.gid, creds.gid))?;
            check(libc::setresuid(creds.uid, creds.uid, creds.uid))?;
            clear_capabilities()?;
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        if let Some(filters) = &self.seccomp {
            for header in &filters.headers {
                check(libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    header as *const libc::sock_fprog,
                    0,
                    0,
                ))?;
            }
        }
        check(libc::chdir(self.cwd.as_ptr()))?;
        if self.namespaces.as_ref().is_some_and(|ns| ns.pid) {
            enter_pid_namespace()?;
        }
        Ok(())
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Empties the effective, permitted and inheritable sets (`capset`, version 3).
unsafe fn clear_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    let rc = libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr());
    check(rc as libc::c_int)
}

/// After `setns(CLONE_NEWPID)` only children are in the new namespace: fork; the child goes on
/// to `exec` (and dies with its parent), the parent waits for it and exits the same way.
unsafe fn enter_pid_namespace() -> io::Result<()> {
    let child = libc::fork();
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        return Ok(());
    }
    // The parent holds nothing the command needs: close every descriptor (the standard streams
    // and the spawner's exec-status pipe among them) so they close when the command does.
    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        libc::signal(sig, libc::SIG_IGN);
    }
    let mut status = 0;
    loop {
        let rc = libc::waitpid(child, &mut status, 0);
        if rc == child {
            break;
        }
        if rc < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(libc::WEXITSTATUS(status));
}
