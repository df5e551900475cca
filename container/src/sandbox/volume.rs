//! Per-sandbox disk quotas: a sandbox's workspace and its process logs live on an ext4 file
//! system of their own — a sparse image file (`<sandbox>/volume.img`, readable by the daemon
//! only) mounted through a loop device at `<sandbox>/vol`, `nosuid,nodev` — so a sandbox that
//! fills its disk gets `ENOSPC` and the host's disk stays free. Only the kernel writes the
//! image's metadata; nothing from a sandbox is ever mounted. Hosts without root, loop devices
//! or e2fsprogs run sandboxes without a quota and say so.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const IMAGE: &str = "volume.img";
const MOUNTPOINT: &str = "vol";

/// The programs used, by absolute path only.
const MKFS: [&str; 2] = ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"];
const MOUNT: [&str; 2] = ["/usr/bin/mount", "/bin/mount"];
const UMOUNT: [&str; 2] = ["/usr/bin/umount", "/bin/umount"];

#[derive(Debug, Clone)]
pub struct Volumes {
    mkfs: PathBuf,
    mount: PathBuf,
    umount: PathBuf,
    pub size_bytes: u64,
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

fn run(program: &Path, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Volumes {
    /// Finds out whether quotas work here by making, mounting and removing a small volume in
    /// `scratch`. `None` (with the reason) when they do not.
    pub fn detect(scratch: &Path, size_bytes: u64) -> Result<Volumes, String> {
        if size_bytes == 0 {
            return Err("disk quotas are switched off (--disk-mb 0)".into());
        }
        if !super::privileged() {
            return Err("the daemon is not root".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err("this host has no loop devices (/dev/loop-control)".into());
        }
        let volumes = Volumes {
            mkfs: find(&MKFS).ok_or("mkfs.ext4 is missing (Debian package e2fsprogs)")?,
            mount: find(&MOUNT).ok_or("mount is missing (Debian package mount)")?,
            umount: find(&UMOUNT).ok_or("umount is missing (Debian package mount)")?,
            size_bytes,
        };
        let probe = scratch.join(format!(".volume-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&probe);
        std::fs::create_dir_all(&probe).map_err(|e| e.to_string())?;
        let probed = Volumes {
            size_bytes: 16 * 1024 * 1024,
            ..volumes.clone()
        }
        .create(&probe)
        .and_then(|()| volumes.remove(&probe));
        let _ = std::fs::remove_dir_all(&probe);
        probed.map(|()| volumes)
    }

    /// Where a sandbox directory's volume is mounted.
    pub fn mountpoint(dir: &Path) -> PathBuf {
        dir.join(MOUNTPOINT)
    }

    /// Makes the sandbox's volume and mounts it.
    pub fn create(&self, dir: &Path) -> Result<(), String> {
        use std::os::unix::fs::OpenOptionsExt;
        let image = dir.join(IMAGE);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&image)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        file.set_len(self.size_bytes).map_err(|e| e.to_string())?;
        drop(file);
        run(
            &self.mkfs,
            &[
                "-q".as_ref(),
                "-F".as_ref(),
                "-m".as_ref(),
                "0".as_ref(),
                "-E".as_ref(),
                "lazy_itable_init=1,lazy_journal_init=1,nodiscard".as_ref(),
                image.as_os_str(),
            ],
        )?;
        self.ensure_mounted(dir)
    }

    /// Mounts the volume of `dir` unless it is mounted (after a reboot, say).
    pub fn ensure_mounted(&self, dir: &Path) -> Result<(), String> {
        let mountpoint = Self::mountpoint(dir);
        if is_mountpoint(&mountpoint) {
            return Ok(());
        }
        std::fs::create_dir_all(&mountpoint).map_err(|e| e.to_string())?;
        run(
            &self.mount,
            &[
                "-o".as_ref(),
                "loop,nosuid,nodev,noatime".as_ref(),
                dir.join(IMAGE).as_os_str(),
                mountpoint.as_os_str(),
            ],
        )?;
        std::fs::set_permissions(
            &mountpoint,
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .map_err(|e| e.to_string())
    }

    /// Unmounts the volume (lazily, so nothing can keep it busy); the image stays.
    pub fn unmount(&self, dir: &Path) -> Result<(), String> {
        let mountpoint = Self::mountpoint(dir);
        if is_mountpoint(&mountpoint) {
            run(&self.umount, &["-l".as_ref(), mountpoint.as_os_str()])?;
        }
        Ok(())
    }

    /// Unmounts the volume and removes its image.
    pub fn remove(&self, dir: &Path) -> Result<(), String> {
        self.unmount(dir)?;
        let _ = std::fs::remove_file(dir.join(IMAGE));
        Ok(())
    }
}

/// Whether `dir` has a sandbox volume.
pub fn has_volume(dir: &Path) -> bool {
    dir.join(IMAGE).is_file()
}

/// Whether `path` is the root of a mounted file system.
fn is_mountpoint(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(own), Some(Ok(parent))) = (
        std::fs::metadata(path),
        path.parent().map(std::fs::metadata),
    ) else {
        return false;
    };
    own.dev() != parent.dev()
}
