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
use crate::sandbox::Sandbox;
use crate::tree::{self, Kind};
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Largest snapshot, compressed, in either direction.
pub const SNAPSHOT_CAP: u64 = 2 * 1024 * 1024 * 1024;

fn snapshot_path(sandbox: &Sandbox, name: &str) -> PathBuf {
    sandbox.dir().join(name)
}

/// Writes the workspace of a stopped sandbox to `<sandbox>/snapshot.tar.gz` and returns its
/// path and size.
pub fn export(sandbox: &Sandbox) -> Result<(PathBuf, u64)> {
    let path = snapshot_path(sandbox, "snapshot.tar.gz");
    let file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
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
    let finished = packed
        .and_then(|()| tar.into_inner())
        .and_then(|gz| gz.finish());
    if let Err(e) = finished {
        let _ = std::fs::remove_file(&path);
        return Err(ApiError::internal(format!("packing the workspace: {e}")));
    }
    let size = std::fs::metadata(&path)?.len();
    if size > SNAPSHOT_CAP {
        let _ = std::fs::remove_file(&path);
        return Err(ApiError::too_large(format!(
            "the workspace snapshot is {size} bytes; the limit is {SNAPSHOT_CAP}"
        )));
    }
    Ok((path, size))
}

/// Streams an incoming snapshot into a file (`0600`, at most `SNAPSHOT_CAP` bytes) and returns
/// its path, ready for `restore`.
pub async fn receive<S, E>(sandbox: &Sandbox, mut stream: S) -> Result<PathBuf>
where
    S: futures::Stream<Item = std::result::Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let path = snapshot_path(sandbox, "incoming.tar.gz");
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .await?;
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
    Ok(path)
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
    let _ = std::fs::remove_file(archive);
    Ok(())
}
