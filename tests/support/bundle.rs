//! The Worker bundle the tests serve: a copy of `build/` taken once per test process, named by
//! its content. `cargo xtask dev` (and any build while the tests run) rewrites `build/`; the
//! tests' wrangler instances keep serving the bundle they started with instead of reloading
//! a different one halfway through.

use crate::root;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// The files wrangler serves (`worker/shim.mjs` imports `../index.js`, which imports the wasm),
/// and the wasm with its function names that the profile bench reads the served one's by
/// ([`named_wasm`]; never served).
const FILES: [&str; 5] = [
    "worker/shim.mjs",
    "index.js",
    "index_bg.wasm",
    "package.json",
    "index_bg.named.wasm",
];

/// Copies older than this (other builds, other checkouts' runs) are removed.
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// The entry module of the test processes' copy of the bundle (`…/worker/shim.mjs`).
pub fn entry() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    ENTRY
        .get_or_init(|| {
            snapshot(
                &root().join("build"),
                &root().join("target/handoff-bundles"),
            )
        })
        .clone()
}

/// The served wasm of [`entry`]'s copy with its function names kept (the same functions, at the
/// same indices).
pub fn named_wasm() -> PathBuf {
    let entry = entry();
    let copy = entry.parent().and_then(Path::parent).unwrap_or(&entry);
    copy.join("index_bg.named.wasm")
}

/// Copies `build`'s served files into `<into>/<sha256 of them>/` (once per content: a copy is
/// written beside and renamed into place, so a reader never sees half of one) and returns its
/// entry module.
fn snapshot(build: &Path, into: &Path) -> PathBuf {
    let mut hash = Sha256::new();
    let mut contents = Vec::new();
    for file in FILES {
        let bytes = std::fs::read(build.join(file)).unwrap_or_else(|e| {
            panic!(
                "the Worker is not built ({}: {e}): run `cargo xtask test` (or `cargo xtask build`) first",
                build.join(file).display()
            )
        });
        hash.update(file.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
        contents.push((file, bytes));
    }
    let name: String = hash.finalize()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = into.join(&name);
    if dir.join(FILES[0]).exists() {
        // Touched, so no other process prunes it as old while it is served.
        if let Ok(file) = std::fs::File::open(&dir) {
            let _ = file.set_modified(SystemTime::now());
        }
    } else {
        let partial = into.join(format!(".{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        for (file, bytes) in &contents {
            let path = partial.join(file);
            std::fs::create_dir_all(path.parent().expect("a file in a directory"))
                .expect("create the bundle copy");
            std::fs::write(&path, bytes).expect("write the bundle copy");
        }
        // Another test process may have put the same copy in place first: theirs is as good.
        if std::fs::rename(&partial, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&partial);
        }
    }
    prune(into, &name);
    dir.join(FILES[0])
}

/// Removes the copies (and abandoned partial ones) not touched for [`KEEP`], except `current`.
fn prune(into: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(into) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| now.duration_since(at).ok())
            .is_some_and(|age| age > KEEP);
        if old && entry.file_name() != current {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_named_by_its_content_and_outlives_a_rebuild() {
        let scratch = crate::scratch_dir("bundle-test");
        let build = scratch.join("build");
        let into = scratch.join("copies");
        for (file, text) in FILES.iter().zip(["shim", "js", "wasm-1", "{}", "named"]) {
            let path = build.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let first = snapshot(&build, &into);
        assert_eq!(
            snapshot(&build, &into),
            first,
            "the same build is copied once"
        );
        // A rebuild changes `build/`, not the copy being served.
        std::fs::write(build.join("index_bg.wasm"), "wasm-2").unwrap();
        let second = snapshot(&build, &into);
        assert_ne!(second, first);
        let served = first.parent().unwrap().parent().unwrap();
        assert_eq!(
            std::fs::read_to_string(served.join("index_bg.wasm")).unwrap(),
            "wasm-1"
        );
        assert_eq!(
            std::fs::read_to_string(
                second
                    .parent()
                    .unwrap()
                    .parent()
                    .unwrap()
                    .join("index_bg.wasm")
            )
            .unwrap(),
            "wasm-2"
        );
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
