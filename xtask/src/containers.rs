//! The container lane: everything `cargo xtask dev --containers` and the container tests need
//! to run each sandbox in a real container from the production image, offline — a Docker
//! engine (Debian's `docker.io`, started with `--bip` so workerd finds the bridge's gateway), a
//! Debian base image made with debootstrap, the egress sidecar image workerd starts beside
//! every container, and the wrapper wrangler runs docker through (`docker-offline`: BuildKit,
//! no `--load`, no pulls of images that are already here).

use crate::proc::{self, Server};
use crate::{root, setup, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The local Debian image the sandbox and sidecar images are built on.
pub const BASE_IMAGE: &str = "handoff-base:bookworm";
/// The egress sidecar's image.
pub const EGRESS_IMAGE: &str = "handoff-egress:dev";
/// Where the sidecar's forwarder listens inside each container's network namespace.
pub const UPSTREAM_PROXY: &str = "http://127.0.0.1:15000";
/// Debian's docker CLI: it speaks to the engine's built-in BuildKit without buildx.
const DOCKER: &str = "/usr/bin/docker";

/// A ready lane: the engine (stopped on drop if this process started it) and what wrangler
/// needs in its environment.
pub struct Lane {
    engine: Option<Server>,
}

impl Lane {
    /// The engine this process started (to be stopped last), if it started one.
    pub fn into_engine(self) -> Option<Server> {
        self.engine
    }

    /// Environment for `wrangler dev` with containers enabled.
    pub fn wrangler_env() -> Vec<(&'static str, String)> {
        vec![
            (
                "WRANGLER_DOCKER_BIN",
                root().join("xtask/docker-offline").display().to_string(),
            ),
            ("MINIFLARE_CONTAINER_EGRESS_IMAGE", EGRESS_IMAGE.to_string()),
        ]
    }

    /// `[[containers]] image_vars` (a TOML inline table) that build the sandbox image offline
    /// from prebuilt binaries.
    pub fn image_vars() -> String {
        format!(
            "{{ BASE = \"{BASE_IMAGE}\", BINARIES = \"prebuilt\", DAEMON = \"target/debug/handoff-sandboxd\" }}"
        )
    }

    /// Environment of the container tests: wrangler's, plus what their Worker config needs.
    pub fn test_env() -> Vec<(&'static str, String)> {
        let mut env = Self::wrangler_env();
        env.push(("HANDOFF_CONTAINER_IMAGE_VARS", Self::image_vars()));
        env.push((
            "HANDOFF_CONTAINER_UPSTREAM_PROXY",
            UPSTREAM_PROXY.to_string(),
        ));
        env
    }
}

fn docker(args: &[&str]) -> Command {
    let mut cmd = Command::new(DOCKER);
    cmd.args(args).env("DOCKER_BUILDKIT", "1");
    cmd
}

fn engine_answers() -> bool {
    proc::output(&mut docker(&["info", "--format", "{{.ServerVersion}}"])).is_some()
}

/// Why the lane cannot run here, if it cannot.
pub fn unavailable() -> Option<String> {
    if !setup::is_root() && !engine_answers() {
        return Some("no Docker engine answers and starting one needs root".into());
    }
    None
}

/// Installs and starts what the lane needs; builds the base and sidecar images if missing.
pub fn ensure(tools: &setup::Tools) -> Result<Lane> {
    setup::ensure_debian(&[
        ("docker.io", &["/usr/bin/docker", "/usr/sbin/dockerd"]),
        ("debootstrap", &["/usr/sbin/debootstrap"]),
    ])?;
    let engine = if engine_answers() {
        None
    } else {
        Some(start_engine()?)
    };
    remove_leftovers();
    if proc::output(&mut docker(&["image", "inspect", BASE_IMAGE])).is_none() {
        make_base_image()?;
    }
    let mut build = tools.command("cargo");
    build
        .args(["build", "--quiet", "-p", "handoff-egress"])
        .current_dir(root());
    proc::run(&mut build)?;
    println!("xtask: building the egress sidecar image ({EGRESS_IMAGE})");
    proc::run(
        docker(&[
            "build",
            "--quiet",
            "-f",
            "sidecar/Dockerfile",
            "--build-arg",
            &format!("BASE={BASE_IMAGE}"),
            "-t",
            EGRESS_IMAGE,
            ".",
        ])
        .current_dir(root()),
    )?;
    Ok(Lane { engine })
}

/// Starts `dockerd` in its own process group and waits until it answers.
fn start_engine() -> Result<Server> {
    if !setup::is_root() {
        return Err("the container lane needs a Docker engine, and starting one needs root".into());
    }
    let dir = root().join(".handoff");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("dockerd.log")).map_err(|e| e.to_string())?;
    println!("xtask: starting the Docker engine (log in .handoff/dockerd.log)");
    let mut cmd = Command::new("/usr/sbin/dockerd");
    // workerd places its egress listener on the bridge's gateway, which a fresh engine only
    // reports when the bridge address is given.
    cmd.args(["--bip", "172.17.0.1/16"])
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    let mut server = Server::spawn("the Docker engine", &mut cmd)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if engine_answers() {
            return Ok(server);
        }
        if let Some(status) = server.exited() {
            return Err(format!(
                "dockerd exited ({status}); see .handoff/dockerd.log"
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err("dockerd did not answer within 60 s; see .handoff/dockerd.log".into())
}

/// Removes containers an earlier run of this project's Worker left behind (and only those).
fn remove_leftovers() {
    let names = proc::output(&mut docker(&[
        "ps",
        "-aq",
        "--filter",
        "name=workerd-.*-handoff-",
    ]))
    .unwrap_or_default();
    let ids: Vec<&str> = names.split_whitespace().collect();
    if !ids.is_empty() {
        let mut args = vec!["rm", "-f"];
        args.extend(ids);
        let _ = proc::output(&mut docker(&args));
    }
    prune_old_images();
}

/// wrangler tags a new image for every start; only the newest is worth keeping (BuildKit's
/// cache makes the next build quick anyway), so older tags and dangling layers go.
fn prune_old_images() {
    let listed = proc::output(&mut docker(&[
        "images",
        "cloudflare-dev/sandboxobject",
        "--format",
        "{{.ID}} {{.Repository}}:{{.Tag}}",
    ]))
    .unwrap_or_default();
    let mut rows = listed.lines().filter_map(|l| l.split_once(' '));
    let Some((newest, _)) = rows.next() else {
        return;
    };
    let old: Vec<&str> = rows
        .filter(|(id, _)| *id != newest)
        .map(|(_, tag)| tag)
        .collect();
    if !old.is_empty() {
        let mut args = vec!["rmi"];
        args.extend(old);
        let _ = proc::output(&mut docker(&args));
    }
    let _ = proc::output(&mut docker(&["image", "prune", "-f"]));
}

/// Debian bookworm, minimal, made offline with debootstrap and imported as `BASE_IMAGE`.
fn make_base_image() -> Result {
    let rootfs: PathBuf = root().join(".handoff/base-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    println!("xtask: making the Debian base image {BASE_IMAGE} with debootstrap (once; ~1 min)");
    proc::run(Command::new("/usr/sbin/debootstrap").args([
        "--variant=minbase",
        "bookworm",
        &rootfs.display().to_string(),
        "http://deb.debian.org/debian",
    ]))?;
    let imported = import(&rootfs);
    let _ = std::fs::remove_dir_all(&rootfs);
    imported
}

fn import(rootfs: &Path) -> Result {
    let mut tar = Command::new("tar")
        .args(["-C", &rootfs.display().to_string(), "-c", "."])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("tar: {e}"))?;
    let stdout = tar.stdout.take().ok_or("tar gave no output")?;
    let imported = proc::run(docker(&["import", "-", BASE_IMAGE]).stdin(stdout));
    let packed = tar.wait().map_err(|e| format!("tar: {e}"))?;
    imported?;
    if packed.success() {
        Ok(())
    } else {
        Err(format!("tar of the base image failed ({packed})"))
    }
}

/// A wrangler config for the container lane, written to `.handoff/wrangler.containers.toml`:
/// the project's own with containers enabled and the sandbox image built offline from prebuilt
/// binaries. `.dev.vars` is linked beside it (wrangler reads it next to the config).
pub fn wrangler_config() -> Result<PathBuf> {
    let root = root();
    let project = std::fs::read_to_string(root.join("wrangler.toml"))
        .map_err(|e| format!("reading wrangler.toml: {e}"))?;
    let mut out = String::new();
    let mut in_build = false;
    for line in project.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_build = trimmed == "[build]";
        }
        if in_build {
            continue;
        }
        let (key, _) = trimmed.split_once('=').unwrap_or((trimmed, ""));
        match key.trim() {
            "main" => out.push_str(&format!(
                "main = {:?}\n",
                root.join("build/worker/shim.mjs").display().to_string()
            )),
            "image" => out.push_str(&format!(
                "image = {:?}\n",
                root.join("container/Dockerfile").display().to_string()
            )),
            "image_build_context" => {
                out.push_str(&format!(
                    "image_build_context = {:?}\nimage_vars = {}\n",
                    root.display().to_string(),
                    Lane::image_vars()
                ));
            }
            "enable_containers" => out.push_str("enable_containers = true\n"),
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let dir = root.join(".handoff");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = dir.join("wrangler.containers.toml");
    std::fs::write(&config, out).map_err(|e| format!("writing {}: {e}", config.display()))?;
    let vars = dir.join(".dev.vars");
    let _ = std::fs::remove_file(&vars);
    std::os::unix::fs::symlink(root.join(".dev.vars"), &vars)
        .map_err(|e| format!("linking {}: {e}", vars.display()))?;
    Ok(config)
}
