//! A `wrangler dev` instance serving the built Worker bundle, with its own config directory,
//! state directory, ports and variables, in its own process group.

use crate::{root, OTHER_TOKEN, SECRETS_KEY, SIGNING_KEY, TOKEN};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

/// Configuration of one instance beyond the defaults every test instance gets.
#[derive(Default, Clone)]
pub struct WorkerOptions {
    /// Extra variables (they override wrangler.toml's `[vars]`).
    pub vars: Vec<(String, String)>,
    /// Leave every credential unset (`HANDOFF_API_TOKENS`, `HANDOFF_OWNER_PASSPHRASE`).
    pub no_credentials: bool,
    /// Sandboxes in real containers (the production path; see `crate::containers`).
    pub containers: bool,
    /// Serve the bench's baseline JavaScript Worker (`tests/bench/baseline/worker.js`) instead
    /// of handoff: the platform's floor, under the same wrangler dev and compatibility date.
    pub baseline: bool,
}

impl WorkerOptions {
    pub fn var(mut self, key: &str, value: impl Into<String>) -> Self {
        self.vars.push((key.to_string(), value.into()));
        self
    }

    /// Uses `daemon` as the local sandbox backend.
    pub fn daemon(self, daemon: &crate::daemon::Daemon) -> Self {
        self.var("SANDBOX_DAEMON_URL", daemon.url())
            .var("SANDBOX_DAEMON_SECRET", crate::DAEMON_SECRET)
    }

    /// Runs every sandbox in a container of its own built from the project's image: the
    /// container lane `cargo xtask test` prepares (engine, images, wrangler's docker wrapper).
    pub fn containers(mut self) -> Self {
        self.containers = true;
        self.var("SANDBOX_DAEMON_SECRET", crate::DAEMON_SECRET).var(
            "HANDOFF_CONTAINER_UPSTREAM_PROXY",
            crate::containers::lane().upstream_proxy.clone(),
        )
    }
}

pub struct Worker {
    pub port: u16,
    /// workerd's DevTools inspector (the bench's CPU profile attaches to it).
    pub inspector_port: u16,
    dir: PathBuf,
    child: Option<Child>,
    startup: Duration,
}

static SHARED: OnceLock<Worker> = OnceLock::new();
/// Process groups and directories of instances held in statics (never dropped), cleaned up when
/// the test process exits.
static AT_EXIT: Mutex<Vec<(i32, PathBuf)>> = Mutex::new(Vec::new());
static AT_EXIT_REGISTERED: Once = Once::new();

extern "C" fn cleanup_at_exit() {
    if let Ok(entries) = AT_EXIT.lock() {
        for (pgid, dir) in entries.iter() {
            kill_group(*pgid);
            crate::remove_scratch(dir);
        }
    }
}

/// Stops `worker`'s process group when the process exits: for instances kept in statics.
pub fn stop_group_at_exit(worker: &Worker) {
    AT_EXIT_REGISTERED.call_once(|| {
        // SAFETY: registers a plain function without captured state, run once at exit.
        unsafe {
            libc::atexit(cleanup_at_exit);
        }
    });
    if let (Some(child), Ok(mut entries)) = (&worker.child, AT_EXIT.lock()) {
        entries.push((child.id() as i32, worker.dir.clone()));
    }
}

/// Stops a daemon kept in a static when the process exits.
pub fn stop_daemon_at_exit(daemon: &crate::daemon::Daemon) {
    AT_EXIT_REGISTERED.call_once(|| {
        // SAFETY: registers a plain function without captured state, run once at exit.
        unsafe {
            libc::atexit(cleanup_at_exit);
        }
    });
    if let (Some(pgid), Ok(mut entries)) = (daemon.pgid(), AT_EXIT.lock()) {
        entries.push((pgid, daemon.dir().clone()));
    }
}

/// An instance with a real sandbox daemon as its backend, shared by the sandbox tests.
pub fn with_sandboxes() -> &'static (crate::daemon::Daemon, Worker) {
    static STACK: OnceLock<(crate::daemon::Daemon, Worker)> = OnceLock::new();
    STACK.get_or_init(|| {
        let daemon = crate::daemon::Daemon::start();
        let worker = Worker::start(WorkerOptions::default().daemon(&daemon));
        stop_group_at_exit(&worker);
        stop_daemon_at_exit(&daemon);
        (daemon, worker)
    })
}

/// The instance shared by all tests of this process (default configuration, plus loopback
/// client metadata documents for the OAuth tests). Tests isolate themselves with unique ids; it
/// is stopped when the process exits.
pub fn shared() -> &'static Worker {
    SHARED.get_or_init(|| {
        let worker =
            Worker::start(WorkerOptions::default().var("HANDOFF_DEV_LOOPBACK_CLIENT_IDS", "1"));
        stop_group_at_exit(&worker);
        worker
    })
}

impl Worker {
    /// Writes a config for this instance and starts it; panics with wrangler's output if it does
    /// not become healthy.
    pub fn start(options: WorkerOptions) -> Worker {
        // A free port can be taken by another server of a parallel test before wrangler binds
        // it; then the instance starts again on another one.
        for attempt in 1.. {
            let mut worker = Worker::configure(options.clone());
            match worker.try_spawn() {
                Ok(()) => return worker,
                Err(tail) if port_taken(&tail) && attempt < 4 => continue,
                Err(tail) => panic!("{tail}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    fn configure(options: WorkerOptions) -> Worker {
        let dir = crate::scratch_dir("it");
        std::fs::create_dir_all(dir.join("state")).expect("create instance dir");
        let port = free_port();
        let mut options = options;
        if !options.vars.iter().any(|(k, _)| k == "HANDOFF_PREVIEW_URL") {
            options = options.var(
                "HANDOFF_PREVIEW_URL",
                format!("http://{}:{port}", crate::PREVIEW_BASE),
            );
        }
        write_config(&dir, &options);
        Worker {
            port,
            inspector_port: free_port(),
            dir,
            child: None,
            // With containers, wrangler builds the sandbox image before it serves.
            startup: Duration::from_secs(if options.containers { 900 } else { 90 }),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The process group of wrangler and its workerd (none while stopped).
    pub fn pgid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn spawn_once(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("wrangler.log"))
            .expect("open log");
        let node_bin = root().join("node_modules/.bin");
        let wrangler = node_bin.join("wrangler");
        assert!(
            wrangler.exists(),
            "wrangler is not installed: run `cargo xtask test` (or `cargo xtask setup`) first"
        );
        let path = format!(
            "{}:{}",
            node_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(wrangler);
        cmd.args(["dev", "--local", "--ip", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .arg("--inspector-port")
            .arg(self.inspector_port.to_string())
            .arg("--persist-to")
            .arg(self.state_dir())
            .arg("--show-interactive-dev-session=false")
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("WRANGLER_SEND_METRICS", "false")
            .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
            .env("WRANGLER_LOG_PATH", self.dir.join("wrangler-logs"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().expect("start wrangler dev");
        crate::reaper::guard(child.id() as i32, &self.dir);
        self.child = Some(child);
        self.wait_healthy()
    }

    /// Starts wrangler dev; on failure, stops what is left and returns its output's end.
    fn try_spawn(&mut self) -> Result<(), String> {
        let outcome = self.spawn_once();
        if outcome.is_err() {
            self.stop();
        }
        outcome
    }

    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + self.startup;
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "wrangler dev exited ({status}):\n{}",
                        self.log_tail()
                    ));
                }
            }
            if http_status(self.port, "/health") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "wrangler dev did not become healthy:\n{}",
            self.log_tail()
        ))
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("wrangler.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The Worker's wasm heap in MiB as its `/health` reports it (it only grows: a high-water
    /// mark); 0 when it does not answer.
    pub async fn wasm_heap_mib(&self, http: &reqwest::Client) -> f64 {
        let health = match http.get(self.url("/health")).send().await {
            Ok(r) => r.json::<serde_json::Value>().await.ok(),
            Err(_) => None,
        };
        health
            .and_then(|h| h["wasmMemoryBytes"].as_f64())
            .map_or(0.0, |b| b / 1024.0 / 1024.0)
    }

    /// How many requests wrangler has logged as served so far (its `[wrangler:info] GET /path
    /// 200 OK` lines: requests from outside, not the Worker's calls to its objects).
    pub fn requests_served(&self) -> usize {
        let text = std::fs::read_to_string(self.dir.join("wrangler.log")).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("[wrangler:info]") && l.contains(" /"))
            .count()
    }

    /// Stops the whole process group and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            end_group_of(&mut child);
        }
    }

    /// Stops and starts again on the same port with the same state (waiting for the port when
    /// the old instance's sockets are slow to go).
    pub fn restart(&mut self) {
        self.stop();
        for attempt in 1.. {
            match self.try_spawn() {
                Ok(()) => return,
                Err(tail) if port_taken(&tail) && attempt < 10 => {
                    std::thread::sleep(Duration::from_millis(500))
                }
                Err(tail) => panic!("{tail}"),
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// wrangler.toml for an instance: the project's own, serving the prebuilt bundle (no build
/// step: the test command built it once; the process's own copy of it, `bundle.rs`), with
/// test secrets in `.dev.vars` beside it.
pub fn write_config(dir: &Path, options: &WorkerOptions) {
    if options.baseline {
        return write_baseline_config(dir);
    }
    let project =
        std::fs::read_to_string(root().join("wrangler.toml")).expect("read wrangler.toml");
    let bundle = crate::bundle::entry();
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
        if trimmed.starts_with("main") && trimmed.contains('=') {
            out.push_str(&format!("main = {:?}\n", bundle.display().to_string()));
        } else if options.containers && trimmed.starts_with("enable_containers") {
            out.push_str("enable_containers = true\n");
        } else if let Some(path) = relative_path_value(trimmed, &["image", "image_build_context"]) {
            let (key, _) = trimmed.split_once('=').unwrap_or_default();
            let absolute = root().join(path.trim_start_matches("./"));
            out.push_str(&format!(
                "{} = {:?}\n",
                key.trim(),
                absolute.display().to_string()
            ));
            if options.containers && key.trim() == "image_build_context" {
                out.push_str(&format!(
                    "image_vars = {}\n",
                    crate::containers::lane().image_vars
                ));
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(
        out.contains(&bundle.display().to_string()),
        "wrangler.toml has no main line"
    );
    std::fs::write(dir.join("wrangler.toml"), out).expect("write test wrangler.toml");

    let mut vars = String::new();
    if !options.no_credentials {
        vars.push_str(&format!(
            "HANDOFF_API_TOKENS=tests:{TOKEN},other:{OTHER_TOKEN}\n"
        ));
        vars.push_str(&format!(
            "HANDOFF_OWNER_PASSPHRASE={}\n",
            crate::oauth::PASSPHRASE
        ));
    }
    vars.push_str(&format!("HANDOFF_SIGNING_KEY={SIGNING_KEY}\n"));
    vars.push_str(&format!("HANDOFF_SECRETS_KEY={SECRETS_KEY}\n"));
    for (key, value) in &options.vars {
        vars.push_str(&format!("{key}={value}\n"));
    }
    std::fs::write(dir.join(".dev.vars"), vars).expect("write .dev.vars");
}

/// The baseline Worker's config: its script, one SQLite Durable Object, handoff's compatibility
/// date, and the bearer token it checks.
fn write_baseline_config(dir: &Path) {
    let project =
        std::fs::read_to_string(root().join("wrangler.toml")).expect("read wrangler.toml");
    let date = project
        .lines()
        .find(|line| line.trim_start().starts_with("compatibility_date"))
        .expect("wrangler.toml has a compatibility_date");
    let script = root().join("tests/bench/baseline/worker.js");
    let config = format!(
        "name = \"baseline\"\nmain = {:?}\n{date}\n\n\
         [[durable_objects.bindings]]\nname = \"STORE\"\nclass_name = \"Store\"\n\n\
         [[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"Store\"]\n",
        script.display().to_string()
    );
    std::fs::write(dir.join("wrangler.toml"), config).expect("write baseline wrangler.toml");
    std::fs::write(dir.join(".dev.vars"), format!("TOKEN={TOKEN}\n")).expect("write .dev.vars");
}

/// The quoted relative path of a `key = "./..."` or `key = "."` line for one of `keys`.
fn relative_path_value<'a>(line: &'a str, keys: &[&str]) -> Option<&'a str> {
    let (key, value) = line.split_once('=')?;
    if !keys.contains(&key.trim()) {
        return None;
    }
    let value = value.trim().trim_matches('"');
    (value == "." || value.starts_with("./")).then_some(value)
}

/// Ends the process group of a child this process started and that nothing else will wait for
/// (kept in a static): reaps the leader itself.
pub fn kill_group(pgid: i32) {
    end_group(pgid, || {
        // SAFETY: the leader is this process's own child, and no `Child` waits for it later.
        unsafe { libc::waitpid(pgid, std::ptr::null_mut(), libc::WNOHANG) };
    });
}

/// Ends `child`'s process group and reaps the child.
pub fn end_group_of(child: &mut Child) {
    end_group(child.id() as i32, || {
        let _ = child.try_wait();
    });
    let _ = child.wait();
}

/// SIGTERM to the group, up to 5 s for all of it to end, then SIGKILL. `reap` reaps the leader
/// as it ends: a zombie leader keeps its group alive, so unreaped every stop would take the
/// whole 5 s and end in SIGKILL.
fn end_group(pgid: i32, reap: impl FnMut()) {
    signal_group_to_end(pgid, reap);
    crate::reaper::release(pgid);
}

fn signal_group_to_end(pgid: i32, mut reap: impl FnMut()) {
    // SAFETY: sends signals to the process group this support code created.
    unsafe {
        libc::killpg(pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        reap();
        // SAFETY: signal 0 only probes whether the group still exists.
        if unsafe { libc::killpg(pgid, 0) } != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above; the group is ours and still there.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Whether wrangler's output says its port was taken.
fn port_taken(output: &str) -> bool {
    output.contains("Address already in use")
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    String::from_utf8_lossy(&head[..n])
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
