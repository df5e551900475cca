//! Builds the Worker bundle (`build/worker/shim.mjs` + wasm) with worker-build, offline: it is
//! pointed at the installed wasm-bindgen, esbuild and wasm-opt instead of downloading them.
//! Skipped when the bundle is newer than every source file.

use crate::setup::Tools;
use crate::{proc, root, shim, Result};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The bundle wrangler serves (wrangler.toml `main`).
pub fn bundle_entry() -> PathBuf {
    root().join("build/worker/shim.mjs")
}

pub fn build(tools: &Tools) -> Result {
    if is_fresh() {
        return Ok(());
    }
    write_catalog(tools)?;
    println!("xtask: building the Worker (release wasm)");
    let root = root();
    proc::run(&mut worker_build(tools))?;
    if !bundle_entry().exists() {
        return Err(format!(
            "worker-build finished but {} is missing",
            bundle_entry().display()
        ));
    }
    let finished = shim::finish(tools, &root.join("build/index.js"))
        .and_then(|()| strip_names(tools, &root.join("build/index_bg.wasm"), &named_wasm()));
    if finished.is_err() {
        // Not left looking fresh: the next build starts over instead of serving it half done.
        let _ = std::fs::remove_file(bundle_entry());
    }
    finished
}

/// worker-build, pointed at the installed tools, building the release wasm into `build/`.
fn worker_build(tools: &Tools) -> std::process::Command {
    let root = root();
    let mut cmd = tools.command(tools.cargo_bin.join("worker-build"));
    cmd.arg("--release")
        .current_dir(&root)
        // Unminified, so `shim::finish` can find worker-build's names; it minifies after.
        .env("NO_MINIFY", "1")
        .env("WASM_BINDGEN_BIN", tools.cargo_bin.join("wasm-bindgen"))
        .env(
            "ESBUILD_BIN",
            root.join("node_modules/@esbuild/linux-x64/bin/esbuild"),
        )
        .env(
            "WASM_OPT_BIN",
            root.join("node_modules/binaryen/bin/wasm-opt"),
        );
    cmd
}

/// The two halves of a split deployment, built to be weighed only (`bench bundle-split`): the
/// wasm with the crate feature `bundle-<half>`, through the same pipeline as the served one,
/// into `target/bundle-split/<half>/` (`index_bg.wasm` without names, `index_bg.named.wasm`);
/// and a third, `front-one-tool`, the front with a single tool: what it is without its tools.
pub fn build_split_variants(tools: &Tools) -> Result {
    let variants = [
        ("front", "bundle-front"),
        ("objects", "bundle-objects"),
        ("front-one-tool", "bundle-front,bundle-one-tool"),
    ];
    for (half, features) in variants {
        println!("xtask: building the wasm of a split deployment's {half} (weighed, never served)");
        let out = format!("target/bundle-split/{half}");
        let mut cmd = worker_build(tools);
        cmd.args(["--out-dir", &out, "."])
            .args(["--features", features]);
        proc::run(&mut cmd)?;
        let dir = root().join(&out);
        strip_names(
            tools,
            &dir.join("index_bg.wasm"),
            &dir.join("index_bg.named.wasm"),
        )?;
    }
    Ok(())
}

/// Writes the files the wasm serves as they are but that are generated natively, when they
/// differ: `src/tools/catalog.json` (the tools' schemas, from their types) and
/// `src/workers/zones.txt` (time zone rules, from the tzdb) — the unit tests that check them,
/// told to write.
fn write_catalog(tools: &Tools) -> Result {
    const GENERATED: [(&str, &str); 2] = [
        (
            "src/tools/catalog.json",
            "tools::catalog::tests::catalog_json_is_what_the_types_generate",
        ),
        (
            "src/workers/zones.txt",
            "workers::zones::tests::zones_txt_is_what_the_tzdb_gives",
        ),
    ];
    println!("xtask: writing the generated tool schemas and time zones if they changed");
    let mut cmd = tools.command("cargo");
    cmd.args(["test", "--quiet", "-p", "handoff", "--lib", "--"])
        .args(GENERATED.map(|(_, test)| test))
        .arg("--exact")
        .env("HANDOFF_WRITE_CATALOG", "1")
        .current_dir(root());
    let before = GENERATED.map(|(path, _)| std::fs::read(root().join(path)).ok());
    proc::run(&mut cmd)?;
    for ((path, _), before) in GENERATED.iter().zip(before) {
        if std::fs::read(root().join(path)).ok() != before {
            println!("xtask: {path} changed: commit it");
        }
    }
    Ok(())
}

/// Drops the function names worker-build keeps in the wasm (650 KB raw, 160 KB gzipped of a
/// 1.65 MB bundle): the Worker's panics then name function indices, not functions. The named
/// wasm stays beside it ([`named_wasm`]), never served: stripping keeps every function's index,
/// so it turns a CPU profile's or a panic's indices back into names.
fn strip_names(tools: &Tools, wasm: &Path, named: &Path) -> Result {
    std::fs::copy(wasm, named).map_err(|e| format!("{}: {e}", wasm.display()))?;
    let stripped = wasm.with_extension("stripped.wasm");
    let mut cmd = tools.command(root().join("node_modules/binaryen/bin/wasm-opt"));
    cmd.arg(wasm).arg("-o").arg(&stripped);
    cmd.args(["--strip-debug", "--strip-producers"]);
    // The features the wasm already uses (worker-build passes the same set).
    for feature in [
        "mutable-globals",
        "sign-ext",
        "nontrapping-float-to-int",
        "bulk-memory",
        "multivalue",
        "reference-types",
        "exception-handling",
    ] {
        cmd.arg(format!("--enable-{feature}"));
    }
    proc::run(&mut cmd)?;
    std::fs::rename(&stripped, wasm).map_err(|e| format!("{}: {e}", wasm.display()))
}

/// The Worker's wasm as built, with its function names (see [`strip_names`]).
fn named_wasm() -> PathBuf {
    root().join("build/index_bg.named.wasm")
}

/// The sandbox daemon binary the local backend runs.
pub fn daemon_binary() -> PathBuf {
    root().join("target/debug/handoff-sandboxd")
}

/// Builds the sandbox daemon (cargo skips it when nothing changed).
pub fn build_daemon(tools: &Tools) -> Result {
    let mut cmd = tools.command("cargo");
    cmd.args(["build", "--quiet", "-p", "handoff-sandbox"])
        .current_dir(root());
    proc::run(&mut cmd)
}

/// True when the bundle exists and no input is newer than it.
fn is_fresh() -> bool {
    let Some(built) = mtime(&bundle_entry()) else {
        return false;
    };
    let root = root();
    let inputs = [
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
        root.join("xtask/src/shim.rs"),
        root.join("xtask/src/recovery.js"),
    ];
    let newest_input = inputs
        .iter()
        .filter_map(|p| mtime(p))
        .chain(newest_in(&root.join("src")))
        .chain(newest_in(&root.join("wire")))
        .max();
    newest_input.is_some_and(|newest| newest <= built)
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn newest_in(dir: &Path) -> Option<SystemTime> {
    let mut newest = mtime(dir);
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() {
            newest_in(&path)
        } else {
            mtime(&path)
        };
        newest = newest.max(candidate);
    }
    newest
}
