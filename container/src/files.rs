//! Files in a sandbox's workspace, touched from the host but never outside the workspace:
//! paths are checked (no `..`, absolute ones must be under `/home/sandbox`), and every open
//! goes through `openat2(RESOLVE_BENEATH)` from the workspace directory, so a symlink that
//! points out of it is refused by the kernel rather than followed. Functions are blocking;
//! callers run them off the async runtime.

use crate::beneath::{self, Links};
use crate::error::{ApiError, Result};
use base64::Engine;
use handoff_wire::{
    Encoding, FileContent, FileEntry, FileKind, FileList, FileWritten, WORKSPACE, WRITE_CAP,
};
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

const MAX_PATH: usize = 4096;
const LIST_LIMIT: usize = 1000;

/// A checked workspace path: `relative` to the workspace directory (empty for the workspace
/// itself) and `display`, the absolute path processes in the sandbox see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub relative: PathBuf,
    pub display: String,
}

/// Checks a path given by a caller (relative to the workspace, or absolute under it).
pub fn resolve(path: &str) -> Result<Resolved> {
    if path.len() > MAX_PATH || path.contains('\0') {
        return Err(ApiError::bad_request(
            "paths are at most 4096 bytes and contain no NUL",
        ));
    }
    let rest = if path.starts_with('/') {
        match path.strip_prefix(WORKSPACE) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => {
                return Err(ApiError::bad_request(format!(
                "{path:?} is outside the workspace: use a path relative to {WORKSPACE} or under it"
            )))
            }
        }
    } else {
        path
    };
    let mut relative = PathBuf::new();
    for component in Path::new(rest).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir => {
                return Err(ApiError::bad_request(format!(
                    "{path:?} contains '..'; paths must stay inside {WORKSPACE}"
                )))
            }
            Component::Prefix(_) => return Err(ApiError::bad_request("invalid path")),
        }
    }
    let display = if relative.as_os_str().is_empty() {
        WORKSPACE.to_string()
    } else {
        format!("{WORKSPACE}/{}", relative.display())
    };
    Ok(Resolved { relative, display })
}

pub fn openat_beneath(dir: &OwnedFd, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    beneath::open(dir, rel, flags, mode, Links::Inside)
}

fn open_home(home: &Path) -> Result<OwnedFd> {
    beneath::open_dir(home).map_err(|e| ApiError::internal(format!("workspace missing: {e}")))
}

/// Maps a resolution error to what the caller should hear.
pub fn explain(e: io::Error, r: &Resolved) -> ApiError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => ApiError::not_found(format!("{} does not exist", r.display)),
        Some(libc::EXDEV) | Some(libc::ELOOP) => ApiError::bad_request(format!(
            "{} leads outside the workspace through a symlink; refused",
            r.display
        )),
        Some(libc::ENOTDIR) => {
            ApiError::bad_request(format!("a component of {} is not a directory", r.display))
        }
        Some(libc::EISDIR) => ApiError::bad_request(format!("{} is a directory", r.display)),
        Some(libc::ENOSYS) => {
            ApiError::internal("this kernel lacks openat2 (Linux 5.6 or later is required)")
        }
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => ApiError::from(e),
        _ => ApiError::internal(format!("{}: {e}", r.display)),
    }
}

pub fn open(home: &Path, r: &Resolved, flags: i32) -> Result<OwnedFd> {
    let home = open_home(home)?;
    openat_beneath(&home, &r.relative, flags, 0).map_err(|e| explain(e, r))
}

use beneath::fd_path;

pub fn require_dir(home: &Path, r: &Resolved) -> Result<()> {
    open(home, r, libc::O_PATH | libc::O_DIRECTORY)
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("working directory: {}", e.message)))
}

pub fn read(home: &Path, r: &Resolved, encoding: Encoding, cap: u64) -> Result<FileContent> {
    // Non-blocking, so a FIFO (or a device) is refused below instead of waiting for a writer.
    let fd = open(home, r, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)?;
    let mut file = File::from(fd);
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ApiError::bad_request(format!(
            "{} is a directory: list it instead",
            r.display
        )));
    }
    if !meta.is_file() {
        return Err(ApiError::bad_request(format!(
            "{} is not a regular file",
            r.display
        )));
    }
    if meta.len() > cap {
        return Err(ApiError::too_large(format!(
            "{} is {} bytes; reads are limited to {cap} bytes ({} MiB). Read part of it with a \
             command (head, tail, sed -n) or download its directory as a ZIP",
            r.display,
            meta.len(),
            cap / (1024 * 1024)
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    Read::by_ref(&mut file)
        .take(cap + 1)
        .read_to_end(&mut bytes)?;
    let size = bytes.len() as u64;
    let content = match encoding {
        Encoding::Text => String::from_utf8(bytes).map_err(|_| {
            ApiError::bad_request(format!(
                "{} is not valid UTF-8 text; read it with encoding base64",
                r.display
            ))
        })?,
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&bytes),
    };
    Ok(FileContent {
        path: r.display.clone(),
        encoding,
        content,
        size,
    })
}

/// Creates every missing directory of `r` (like `mkdir -p`, owned by `owner`) and returns the
/// last one.
fn mkdir_all(home: &Path, owner: Option<u32>, r: &Resolved) -> Result<OwnedFd> {
    let root = open_home(home)?;
    let mut prefix = PathBuf::new();
    let mut current = openat_beneath(&root, Path::new(""), libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(|e| explain(e, r))?;
    for part in r.relative.components() {
        prefix.push(part);
        let flags = libc::O_PATH | libc::O_DIRECTORY;
        current = match openat_beneath(&root, &prefix, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let name = CString::new(part.as_os_str().as_bytes())
                    .map_err(|_| ApiError::bad_request("invalid path"))?;
                // SAFETY: valid directory fd and C string.
                let rc = unsafe { libc::mkdirat(current.as_raw_fd(), name.as_ptr(), 0o755) };
                if rc != 0 {
                    let err = io::Error::last_os_error();
                    if err.raw_os_error() != Some(libc::EEXIST) {
                        return Err(explain(err, r));
                    }
                } else if let Some(uid) = owner {
                    beneath::chown_at(&current, part.as_os_str(), uid)?;
                }
                openat_beneath(&root, &prefix, flags, 0).map_err(|e| explain(e, r))?
            }
            Err(e) => return Err(explain(e, r)),
        };
    }
    Ok(current)
}

pub fn mkdir(home: &Path, owner: Option<u32>, r: &Resolved) -> Result<FileWritten> {
    mkdir_all(home, owner, r)?;
    Ok(FileWritten {
        path: r.display.clone(),
        size: 0,
    })
}

/// Writes a whole file atomically (temporary file, then rename), creating parent directories;
/// new files and directories belong to `owner`.
pub fn write(home: &Path, owner: Option<u32>, r: &Resolved, bytes: &[u8]) -> Result<FileWritten> {
    if bytes.len() as u64 > WRITE_CAP {
        return Err(write_too_large(bytes.len() as u64));
    }
    let name = r
        .relative
        .file_name()
        .ok_or_else(|| ApiError::bad_request("a file path is needed, not the workspace itself"))?
        .to_owned();
    let parent = Resolved {
        relative: r
            .relative
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        display: r.display.clone(),
    };
    let dir = mkdir_all(home, owner, &parent)?;
    let tmp_name = format!(".handoff-write-{}-{}", std::process::id(), unique());
    let tmp = openat_beneath(
        &dir,
        Path::new(&tmp_name),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o644,
    )
    .map_err(|e| explain(e, r))?;
    let mut file = File::from(tmp);
    if let Some(uid) = owner {
        std::os::unix::fs::fchown(&file, Some(uid), Some(uid))?;
    }
    let written = file.write_all(bytes).and_then(|_| file.flush());
    let tmp_c = CString::new(tmp_name.as_bytes()).map_err(|_| ApiError::internal("tmp name"))?;
    let name_c =
        CString::new(name.as_bytes()).map_err(|_| ApiError::bad_request("invalid name"))?;
    let renamed = written.and_then(|_| {
        // SAFETY: valid directory fd and C strings.
        let rc = unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                tmp_c.as_ptr(),
                dir.as_raw_fd(),
                name_c.as_ptr(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    });
    if let Err(e) = renamed {
        // SAFETY: removing our own temporary file by name in the same directory.
        unsafe {
            libc::unlinkat(dir.as_raw_fd(), tmp_c.as_ptr(), 0);
        }
        return Err(explain(e, r));
    }
    Ok(FileWritten {
        path: r.display.clone(),
        size: bytes.len() as u64,
    })
}

pub fn write_too_large(size: u64) -> ApiError {
    ApiError::too_large(handoff_wire::write_too_large_message(size))
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub fn list(home: &Path, r: &Resolved) -> Result<FileList> {
    let dir = open(home, r, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let base = fd_path(&dir);
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut names: Vec<_> = std::fs::read_dir(&base)?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        if entries.len() == LIST_LIMIT {
            truncated = true;
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(base.join(&name)) else {
            continue;
        };
        let kind = if meta.file_type().is_symlink() {
            FileKind::Symlink
        } else if meta.is_dir() {
            FileKind::Dir
        } else if meta.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        };
        let name = name.to_string_lossy().into_owned();
        entries.push(FileEntry {
            path: format!("{}/{name}", r.display.trim_end_matches('/')),
            name,
            kind,
            size: meta.len(),
            modified: meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000,
        });
    }
    Ok(FileList {
        path: r.display.clone(),
        entries,
        truncated,
    })
}

pub fn delete(home: &Path, r: &Resolved, recursive: bool) -> Result<()> {
    let Some(name) = r.relative.file_name() else {
        return Err(ApiError::bad_request(
            "the workspace itself cannot be deleted",
        ));
    };
    let parent = Resolved {
        relative: r
            .relative
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        display: r.display.clone(),
    };
    let dir = open(home, &parent, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let target = fd_path(&dir).join(name);
    let meta = std::fs::symlink_metadata(&target)
        .map_err(|_| ApiError::not_found(format!("{} does not exist", r.display)))?;
    if meta.is_dir() {
        if !recursive {
            return Err(ApiError::bad_request(format!(
                "{} is a directory; delete it with recursive",
                r.display
            )));
        }
        std::fs::remove_dir_all(&target)?;
    } else {
        std::fs::remove_file(&target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_wire::READ_CAP;

    fn temp_home(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("handoff-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        dir
    }

    #[test]
    fn resolve_accepts_workspace_paths_and_refuses_escapes() {
        assert_eq!(resolve("a/b.txt").unwrap().display, "/home/sandbox/a/b.txt");
        assert_eq!(
            resolve("/home/sandbox/a").unwrap().relative,
            PathBuf::from("a")
        );
        assert_eq!(resolve("").unwrap().display, "/home/sandbox");
        assert_eq!(resolve("./a/./b").unwrap().relative, PathBuf::from("a/b"));
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/home/sandboxer",
            "a\0b",
            "/home/sandbox/../x",
        ] {
            assert!(resolve(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn round_trip_list_delete_and_symlink_escape() {
        let dir = temp_home("rt");
        let home = dir.join("home");
        let r = resolve("deep/er/file.bin").unwrap();
        let bytes: Vec<u8> = (0..=255u8).collect();
        write(&home, None, &r, &bytes).unwrap();
        let back = read(&home, &r, Encoding::Base64, READ_CAP).unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(back.content)
                .unwrap(),
            bytes
        );
        assert!(
            read(&home, &r, Encoding::Text, READ_CAP).is_err(),
            "binary is not text"
        );
        let listed = list(&home, &resolve("deep/er").unwrap()).unwrap();
        assert_eq!(listed.entries.len(), 1);
        assert_eq!(listed.entries[0].path, "/home/sandbox/deep/er/file.bin");

        std::fs::write(dir.join("secret"), "host secret").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), home.join("escape")).unwrap();
        std::os::unix::fs::symlink("../secret", home.join("relative-escape")).unwrap();
        std::os::unix::fs::symlink(&dir, home.join("escape-dir")).unwrap();
        for path in ["escape", "relative-escape", "escape-dir/secret"] {
            let err = read(&home, &resolve(path).unwrap(), Encoding::Text, READ_CAP).unwrap_err();
            assert!(err.message.contains("outside"), "{path}: {}", err.message);
        }
        let err = write(&home, None, &resolve("escape-dir/new").unwrap(), b"x").unwrap_err();
        assert!(err.message.contains("outside"), "{}", err.message);
        assert!(!dir.join("new").exists());
        std::os::unix::fs::symlink("deep/er/file.bin", home.join("inner")).unwrap();
        assert!(read(
            &home,
            &resolve("inner").unwrap(),
            Encoding::Base64,
            READ_CAP
        )
        .is_ok());

        assert!(delete(&home, &resolve("deep").unwrap(), false).is_err());
        delete(&home, &resolve("deep").unwrap(), true).unwrap();
        assert!(!home.join("deep").exists());
        delete(&home, &resolve("escape-dir").unwrap(), true).unwrap();
        assert!(
            dir.join("secret").exists(),
            "deleting a symlink never touches its target"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = temp_home("fifo");
        let home = dir.join("home");
        let path = std::ffi::CString::new(home.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        let err = read(&home, &resolve("pipe").unwrap(), Encoding::Text, READ_CAP).unwrap_err();
        assert!(
            err.message.contains("not a regular file"),
            "{}",
            err.message
        );
        let zip = crate::zipdir::zip_dir(&home, &resolve("").unwrap());
        assert!(
            zip.is_ok(),
            "the ZIP skips the FIFO instead of blocking on it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn caps_are_enforced() {
        let dir = temp_home("caps");
        let home = dir.join("home");
        let big = vec![b'a'; READ_CAP as usize + 1];
        std::fs::write(home.join("big.txt"), &big).unwrap();
        let err = read(
            &home,
            &resolve("big.txt").unwrap(),
            Encoding::Text,
            READ_CAP,
        )
        .unwrap_err();
        assert_eq!(err.code, handoff_wire::ErrorCode::TooLarge);
        assert!(err.message.contains("1 MiB"));
        let err = write(
            &home,
            None,
            &resolve("x").unwrap(),
            &vec![0; WRITE_CAP as usize + 1],
        )
        .unwrap_err();
        assert_eq!(err.code, handoff_wire::ErrorCode::TooLarge);
        let zip = crate::zipdir::zip_dir(&home, &resolve("").unwrap()).unwrap();
        assert!(zip.len() < big.len(), "compressed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
