//! Workspace snapshots: the whole workspace as a tar.gz, and restoring one into a fresh
//! directory that replaces the workspace. The Worker keeps snapshots in R2 so a paused sandbox
//! survives the daemon, the host and the container.
//!
//! Export runs only on a stopped sandbox (the caller halts it first) and walks the workspace
//! descriptor-relative without following links (`tree::walk`): nothing in the sandbox can swap
//! a directory for a symlink mid-walk and have host files packed. Links are stored as links;
//! FIFOs, sockets and devices are left out (they hold no data and would block a reader).
//! Restore strips set-user-ID and set-group-ID bits and hands every file to the sandbox's user.

use crate::beneath::{self, Links};
use crate::error::{ApiError, Result};
use crate::sandbox::{scratch_archive, Sandbox, INCOMING, OUTGOING};
use crate::tree::{self, Kind};
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest snapshot, compressed, in either direction.
pub const SNAPSHOT_CAP: u64 = 2 * 1024 * 1024 * 1024;

/// An archive in the sandbox's folder, named for this call alone (two snapshots or two uploads
/// at once never write into each other's file; one left by a daemon that died is overwritten)
/// and removed when dropped: after a restore, or when the call fails or its client goes away.
pub struct Scratch(PathBuf);

impl Scratch {
    fn new(sandbox: &Sandbox, stem: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Scratch(scratch_archive(sandbox.dir(), stem, n))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Packs the workspace of a stopped sandbox and returns the archive open at its start, with its
/// size. Its file is already unlinked: the disk it takes is given back when the reader is
/// dropped (the download done or abandoned), and nothing is left in the sandbox's folder.
pub fn export(sandbox: &Sandbox) -> Result<(File, u64)> {
    let scratch = Scratch::new(sandbox, OUTGOING);
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(scratch.path())?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::fast()));
    let root = beneath::open_dir(&sandbox.home)?;
    let packed = tree::walk(&root, &mut |entry| {
        let mut header = tar::Header::new_gnu();
        header.set_mode(entry.stat.st_mode & 0o777);
        header.set_mtime(entry.stat.st_mtime.max(0) as u64);
        header.set_uid(1000);
        header.set_gid(1000);
        match entry.kind {
            Kind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                tar.append_data(&mut header, entry.relative, io::empty())
            }
            Kind::File => {
                let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
                let fd =
                    beneath::open(entry.parent, Path::new(entry.name), flags, 0, Links::Never)?;
                let file = File::from(fd);
                let meta = file.metadata()?;
                if !meta.is_file() {
                    return Ok(());
                }
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(meta.len());
                tar.append_data(&mut header, entry.relative, file.take(meta.len()))
            }
            Kind::Symlink => {
                let target = std::fs::read_link(beneath::fd_path(entry.parent).join(entry.name))?;
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                tar.append_link(&mut header, entry.relative, target)
            }
            Kind::Other => Ok(()),
        }
    });
    let mut file = packed
        .and_then(|()| tar.into_inner())
        .and_then(|gz| gz.finish())
        .map_err(|e| ApiError::internal(format!("packing the workspace: {e}")))?;
    drop(scratch);
    let size = file.metadata()?.len();
    if size > SNAPSHOT_CAP {
        return Err(ApiError::too_large(format!(
            "the workspace snapshot is {size} bytes; the limit is {SNAPSHOT_CAP}"
        )));
    }
    file.seek(io::SeekFrom::Start(0))?;
    Ok((file, size))
}

/// Streams an incoming snapshot into a file of its own (`0600`, at most `SNAPSHOT_CAP` bytes),
/// ready for `restore`.
pub async fn receive<S, E>(sandbox: &Sandbox, mut stream: S) -> Result<Scratch>
where
    S: futures::Stream<Item = std::result::Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let scratch = Scratch::new(sandbox, INCOMING);
    let opened = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(scratch.path())
        .await;
    // A delete that got in first took the folder: say so, not "no such file".
    let mut file = opened.map_err(|e| match sandbox.gate.still_open() {
        Ok(()) => ApiError::from(e),
        Err(gone) => gone,
    })?;
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the snapshot: {e}")))?;
        size += chunk.len() as u64;
        if size > SNAPSHOT_CAP {
            return Err(ApiError::too_large("the snapshot exceeds the size limit"));
        }
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    Ok(scratch)
}

/// Replaces the workspace with the contents of `archive` (the sandbox must be stopped).
/// Entries that would land outside the new directory are refused by the unpacker.
pub fn restore(sandbox: &Sandbox, archive: &Path) -> Result<()> {
    // Beside the workspace, on its file system (its volume, when it has one).
    let beside = |name: &str| sandbox.home.with_file_name(name);
    let fresh = beside("home.restoring");
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh)?;
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o700))?;
    let file = File::open(archive)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.set_preserve_permissions(true);
    tar.set_preserve_ownerships(false);
    tar.set_unpack_xattrs(false);
    // No set-user-ID, set-group-ID or sticky bits, whatever the archive says.
    tar.set_mask(0o7000);
    tar.set_overwrite(true);
    let unpacked = tar.unpack(&fresh).map_err(|e| {
        ApiError::bad_request(format!(
            "the snapshot is not a valid workspace archive: {e}"
        ))
    });
    let owned = unpacked.and_then(|()| match sandbox.owner() {
        Some(uid) => tree::chown_all(&fresh, uid).map_err(ApiError::from),
        None => Ok(()),
    });
    if let Err(e) = owned {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(e);
    }
    let old = beside("home.old");
    let _ = std::fs::remove_dir_all(&old);
    std::fs::rename(&sandbox.home, &old)?;
    std::fs::rename(&fresh, &sandbox.home)?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}
