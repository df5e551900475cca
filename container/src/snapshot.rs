//! Workspace snapshots: the whole workspace as a tar.gz (symlinks stored as links, never
//! followed), and restoring one into a fresh directory that replaces the workspace. The Worker
//! keeps snapshots in R2 so a paused sandbox survives the daemon, the host and the container.

use crate::error::{ApiError, Result};
use crate::sandbox::Sandbox;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Largest snapshot, compressed, in either direction.
pub const SNAPSHOT_CAP: u64 = 2 * 1024 * 1024 * 1024;

fn snapshot_path(sandbox: &Sandbox, name: &str) -> PathBuf {
    sandbox.dir().join(name)
}

/// Writes the workspace to `<sandbox>/snapshot.tar.gz` and returns its path and size.
pub fn export(sandbox: &Sandbox) -> Result<(PathBuf, u64)> {
    let path = snapshot_path(sandbox, "snapshot.tar.gz");
    let file = File::create(&path)?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::fast()));
    tar.follow_symlinks(false);
    tar.mode(tar::HeaderMode::Complete);
    tar.append_dir_all(".", &sandbox.home)
        .map_err(|e| ApiError::internal(format!("packing the workspace: {e}")))?;
    tar.into_inner()
        .and_then(|gz| gz.finish())
        .map_err(|e| ApiError::internal(format!("packing the workspace: {e}")))?;
    let size = std::fs::metadata(&path)?.len();
    if size > SNAPSHOT_CAP {
        let _ = std::fs::remove_file(&path);
        return Err(ApiError::too_large(format!(
            "the workspace snapshot is {size} bytes; the limit is {SNAPSHOT_CAP}"
        )));
    }
    Ok((path, size))
}

/// A file to stream an incoming snapshot into before it is restored.
pub fn incoming_path(sandbox: &Sandbox) -> PathBuf {
    snapshot_path(sandbox, "incoming.tar.gz")
}

/// Replaces the workspace with the contents of `archive` (the sandbox must be stopped).
/// Entries that would land outside the new directory are refused by the unpacker.
pub fn restore(sandbox: &Sandbox, archive: &Path) -> Result<()> {
    let fresh = snapshot_path(sandbox, "home.restoring");
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh)?;
    let file = File::open(archive)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.set_preserve_permissions(true);
    tar.set_overwrite(true);
    if let Err(e) = tar.unpack(&fresh) {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(ApiError::bad_request(format!(
            "the snapshot is not a valid workspace archive: {e}"
        )));
    }
    let old = snapshot_path(sandbox, "home.old");
    let _ = std::fs::remove_dir_all(&old);
    std::fs::rename(&sandbox.home, &old)?;
    std::fs::rename(&fresh, &sandbox.home)?;
    let _ = std::fs::remove_dir_all(&old);
    let _ = std::fs::remove_file(archive);
    Ok(())
}
