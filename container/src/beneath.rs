//! Opening paths relative to a directory without ever leaving it: `openat2` with
//! `RESOLVE_BENEATH` (and, for walks, `RESOLVE_NO_SYMLINKS`), so a symlink or `..` that points
//! out of the directory is refused by the kernel rather than followed — even when a sandbox
//! process swaps a directory for a link while the daemon works.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// How symlinks inside the directory are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed while they stay beneath the directory.
    Inside,
    /// Never followed.
    Never,
}

/// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS [| RESOLVE_NO_SYMLINKS])`.
pub fn open(dir: &OwnedFd, rel: &Path, flags: i32, mode: u32, links: Links) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let c = CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: open_how is plain data; zeroed is a valid starting value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        mode as u64
    } else {
        0
    };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    if links == Links::Never {
        how.resolve |= libc::RESOLVE_NO_SYMLINKS;
    }
    // SAFETY: valid pointers and size for the openat2 system call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: the kernel returned a new, owned descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}

/// An `O_PATH` descriptor of a directory given by its host path (trusted: the daemon's own).
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_PATH)
        .open(path)?;
    Ok(file.into())
}

/// A `/proc/self/fd/N` path for an open directory, for std APIs that take paths.
pub fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn stat_at(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<libc::stat> {
    let c = CString::new(name.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: stat is plain data, filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, C string and out pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `fchownat(dir, name, uid, uid, AT_SYMLINK_NOFOLLOW)` (an empty name changes `dir` itself).
pub fn chown_at(dir: &OwnedFd, name: &std::ffi::OsStr, uid: u32) -> io::Result<()> {
    let c = CString::new(name.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let flags = if name.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        libc::AT_SYMLINK_NOFOLLOW
    };
    // SAFETY: valid descriptor and C string.
    let rc = unsafe { libc::fchownat(dir.as_raw_fd(), c.as_ptr(), uid, uid, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
