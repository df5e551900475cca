//! A sandbox directory on disk: `sandbox.json` (its spec and host user, `0600`), the workspace
//! and process logs (on its volume, `vol/`, when it has one), the egress log and snapshots.

use super::volume;
use handoff_wire::SandboxSpec;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub const META_FILE: &str = "sandbox.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub created_at: i64,
    pub spec: SandboxSpec,
    /// The sandbox's host user (absent in directories made before users existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Where a sandbox directory keeps the workspace and the process logs: on its volume when it
/// has one.
pub fn data_dir(dir: &Path) -> PathBuf {
    if volume::has_volume(dir) {
        volume::Volumes::mountpoint(dir)
    } else {
        dir.to_path_buf()
    }
}

/// The stems of a snapshot's archive files in a sandbox's folder, there while its download or
/// upload lasts (`snapshot::Scratch`).
pub const INCOMING: &str = "incoming";
pub const OUTGOING: &str = "outgoing";

pub fn scratch_archive(dir: &Path, stem: &str, n: u64) -> PathBuf {
    dir.join(format!("{stem}-{n}.tar.gz"))
}

/// Removes the archives a daemon that died mid-download or mid-upload left in `dir`.
pub fn sweep_scratch(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let scratch = [INCOMING, OUTGOING].iter().any(|stem| {
            name.strip_prefix(stem)
                .is_some_and(|rest| rest.starts_with('-'))
        });
        if scratch && name.ends_with(".tar.gz") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A sandbox's `sandbox.json`, when it has a readable one.
pub fn read_meta(dir: &Path) -> Option<Meta> {
    let text = std::fs::read_to_string(dir.join(META_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes a sandbox's `sandbox.json` (readable by the daemon only), without secret values.
pub fn write_meta(dir: &Path, meta: &Meta) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Secret values live in the daemon's memory only: the Worker sends them again.
    let mut stored = meta.clone();
    for grant in &mut stored.spec.secrets {
        grant.value.clear();
    }
    let bytes = serde_json::to_vec(&stored).map_err(std::io::Error::other)?;
    let tmp = dir.join(".sandbox.json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(&bytes)?;
    drop(file);
    std::fs::rename(&tmp, dir.join(META_FILE))?;
    Ok(())
}

/// Makes `/home/sandbox` lead to `home` — in a container that holds one sandbox, where no
/// mount namespace puts the workspace there.
pub fn link_workspace(home: &Path) -> std::io::Result<()> {
    let link = Path::new(handoff_wire::WORKSPACE);
    if std::fs::read_link(link).is_ok_and(|target| target == home) {
        return Ok(());
    }
    let _ = std::fs::remove_file(link);
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::os::unix::fs::symlink(home, link)
}
