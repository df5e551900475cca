//! Per-sandbox disk quotas: a sandbox's workspace and its process logs live on an ext4 file
//! system of their own — a sparse image file (`<sandbox>/volume.img`, readable by the daemon
//! only) mounted through a loop device at `<sandbox>/vol`, `nosuid,nodev` — so a sandbox that
//! fills its disk gets `ENOSPC` and the host's disk stays free. Only the kernel writes the
//! image's metadata; nothing from a sandbox is ever mounted. Hosts without root, loop devices
//! or e2fsprogs run sandboxes without a quota and say so.
//!
//! Formatting and mounting a volume takes ~20 ms, so a [`Pool`] keeps a few formatted and
//! mounted in `<root>/.volumes`; a new sandbox moves one into place (`mount --move`) and the
//! pool is refilled in the background.

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

/// Volumes made ahead of need.
pub struct Pool {
    pub volumes: Volumes,
    dir: PathBuf,
    ready: std::sync::Mutex<Vec<PathBuf>>,
    filling: std::sync::atomic::AtomicBool,
    /// Set when the daemon stops: no more volumes are made.
    closed: std::sync::atomic::AtomicBool,
    next: std::sync::atomic::AtomicU64,
}

/// Volumes kept ready.
const POOL_SIZE: usize = 2;

impl Pool {
    /// A pool in `<root>/.volumes`, emptied of anything an earlier daemon left.
    pub fn new(volumes: Volumes, root: &Path) -> std::sync::Arc<Pool> {
        let dir = root.join(".volumes");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let _ = volumes.remove(&entry.path());
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        let pool = std::sync::Arc::new(Pool {
            volumes,
            dir,
            ready: std::sync::Mutex::new(Vec::new()),
            filling: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
            next: std::sync::atomic::AtomicU64::new(0),
        });
        pool.refill();
        pool
    }

    /// Gives `dir` its volume: one from the pool, or a new one when the pool is empty.
    pub fn provide(self: &std::sync::Arc<Self>, dir: &Path) -> Result<(), String> {
        let ready = self.ready.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let provided = match ready {
            Some(slot) => self.volumes.adopt(&slot, dir),
            None => self.volumes.create(dir),
        };
        self.refill();
        provided
    }

    /// Makes volumes in the background until `POOL_SIZE` are ready.
    fn refill(self: &std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.filling.swap(true, Ordering::SeqCst) {
            return;
        }
        let pool = self.clone();
        std::thread::spawn(move || {
            while !pool.closed.load(Ordering::SeqCst)
                && pool.ready.lock().map(|r| r.len()).unwrap_or(POOL_SIZE) < POOL_SIZE
            {
                let n = pool.next.fetch_add(1, Ordering::SeqCst);
                let slot = pool.dir.join(n.to_string());
                let made = std::fs::create_dir_all(&slot)
                    .map_err(|e| e.to_string())
                    .and_then(|()| pool.volumes.create(&slot));
                match made {
                    Ok(()) => pool
                        .ready
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(slot),
                    Err(e) => {
                        eprintln!("handoff-sandboxd: could not prepare a volume: {e}");
                        let _ = std::fs::remove_dir_all(&slot);
                        break;
                    }
                }
            }
            pool.filling.store(false, Ordering::SeqCst);
        });
    }

    /// Stops making volumes, then unmounts and removes the ones kept ready.
    pub fn drain(&self) {
        use std::sync::atomic::Ordering;
        self.closed.store(true, Ordering::SeqCst);
        for _ in 0..250 {
            if !self.filling.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let ready: Vec<PathBuf> =
            std::mem::take(&mut *self.ready.lock().unwrap_or_else(|p| p.into_inner()));
        for slot in ready {
            let _ = self.volumes.remove(&slot);
            let _ = std::fs::remove_dir_all(&slot);
        }
    }
}

impl Volumes {
    /// Moves the mounted volume of pool slot `slot` to `dir` (image and mount both).
    fn adopt(&self, slot: &Path, dir: &Path) -> Result<(), String> {
        std::fs::rename(slot.join(IMAGE), dir.join(IMAGE)).map_err(|e| e.to_string())?;
        let target = Self::mountpoint(dir);
        std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
        run(
            &self.mount,
            &[
                "--move".as_ref(),
                Self::mountpoint(slot).as_os_str(),
                target.as_os_str(),
            ],
        )?;
        let _ = std::fs::remove_dir_all(slot);
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
