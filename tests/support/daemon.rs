//! The real sandbox daemon (`handoff-sandboxd`), started from the built binary with its own
//! sandbox root, port and secret, in its own process group.

use crate::{root, worker::free_port, DAEMON_SECRET};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Isolation options (default: namespaces required).
    isolation: Vec<String>,
}

impl Daemon {
    pub fn start() -> Daemon {
        Self::start_with(&["--isolation", "namespaces"])
    }

    /// A daemon started with these isolation options instead of the default.
    pub fn start_with(isolation: &[&str]) -> Daemon {
        let dir = crate::scratch_dir("daemon");
        let mut daemon = Daemon {
            port: free_port(),
            dir,
            child: None,
            isolation: isolation.iter().map(|s| s.to_string()).collect(),
        };
        daemon.spawn();
        daemon
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where the daemon keeps sandboxes (`<root>/<id>/home` is a workspace).
    pub fn sandboxes(&self) -> PathBuf {
        self.dir.join("sandboxes")
    }

    /// A sandbox's workspace as the host sees it (on the sandbox's volume when it has one).
    pub fn workspace(&self, id: &str) -> PathBuf {
        let dir = self.sandboxes().join(id);
        let on_volume = dir.join("vol/home");
        if on_volume.is_dir() {
            on_volume
        } else {
            dir.join("home")
        }
    }

    pub fn pgid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub fn dir(&self) -> &PathBuf {
        &self.dir
    }

    fn spawn(&mut self) {
        let binary = binary();
        assert!(
            binary.exists(),
            "the sandbox daemon is not built: run `cargo xtask test` (or cargo build -p handoff-sandbox)"
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))
            .expect("daemon log");
        let child = Command::new(binary)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--root")
            .arg(self.sandboxes())
            // Host users of its own for each daemon a test starts (its isolation options may
            // name others): daemons that run at once must not share them, ports tell them
            // apart, and a restart keeps its port and so its sandboxes' users.
            .args(["--uid-base", "port"])
            .args(&self.isolation)
            .args(tools_dir())
            .env("SANDBOX_DAEMON_SECRET", DAEMON_SECRET)
            .env("HANDOFF_UPSTREAM_EXTRA_CA", crate::tls::ca().file())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start handoff-sandboxd");
        crate::reaper::guard(child.id() as i32, &self.dir);
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("handoff-sandboxd exited ({status}):\n{}", self.log());
                }
            }
            if health(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("handoff-sandboxd did not become healthy:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::worker::end_group_of(&mut child);
        }
    }

    /// Ends the daemon's process group with SIGKILL, as a crash or the OOM killer would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: the process group this support code created.
            unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
            crate::reaper::release(child.id() as i32);
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
        crate::remove_scratch(&self.dir);
    }
}

fn binary() -> PathBuf {
    root().join("target/debug/handoff-sandboxd")
}

/// Runs the daemon with `args` (after a listen address, a root and the secret) expecting it to
/// refuse to start, and returns what it wrote to stderr.
pub fn refusal(args: &[&str]) -> String {
    let dir = crate::scratch_dir("daemon-refused");
    let port = free_port();
    let mut child = Command::new(binary())
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--root")
        .arg(dir.join("sandboxes"))
        .args(args)
        .env("SANDBOX_DAEMON_SECRET", DAEMON_SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start handoff-sandboxd");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        match child.try_wait().expect("daemon status") {
            Some(status) => break status,
            None if Instant::now() > deadline || health(port) => {
                crate::worker::end_group_of(&mut child);
                crate::remove_scratch(&dir);
                panic!("handoff-sandboxd started where it should have refused to");
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut said = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut said);
    }
    crate::remove_scratch(&dir);
    assert!(!status.success(), "{said}");
    said
}

/// `--tools-dir` with the pinned OpenCode binary, when it is installed.
fn tools_dir() -> Vec<String> {
    let dir = root().join("node_modules/opencode-linux-x64/bin");
    if dir.join("opencode").exists() {
        vec!["--tools-dir".into(), dir.display().to_string()]
    } else {
        Vec::new()
    }
}

fn health(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        stream,
        "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut head = [0u8; 16];
    stream.read(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// A client of one sandbox on a daemon, speaking its `/v1` API with a token for that sandbox.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub id: String,
    pub token: String,
}

impl Client {
    /// Creates sandbox `id` on `daemon` (idempotent) and returns a client for it.
    pub async fn new(daemon: &Daemon, id: &str) -> Client {
        let client = Client {
            http: reqwest::Client::new(),
            base: format!("{}/v1/sandboxes/{id}", daemon.url()),
            id: id.to_string(),
            token: crate::links::daemon_token(id, 300),
        };
        let created = client
            .send(reqwest::Method::PUT, "", Some(serde_json::json!({})))
            .await;
        assert_eq!(created.status, 200, "{}", created.body);
        client
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> crate::RawResponse {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token));
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        crate::mcp::read(req.send().await.expect("daemon request")).await
    }

    /// Runs a shell command to completion (`timeout_ms`) and returns the exec result.
    pub async fn exec(&self, command: &str, timeout_ms: u64) -> serde_json::Value {
        let out = self
            .send(
                reqwest::Method::POST,
                "/exec",
                Some(serde_json::json!({"command": command, "timeout_ms": timeout_ms})),
            )
            .await;
        assert_eq!(out.status, 200, "{}", out.body);
        out.json()
    }
}
