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

    pub fn pgid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub fn dir(&self) -> &PathBuf {
        &self.dir
    }

    fn spawn(&mut self) {
        let binary = root().join("target/debug/handoff-sandboxd");
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
            .args(&self.isolation)
            .args(tools_dir())
            .env("SANDBOX_DAEMON_SECRET", DAEMON_SECRET)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start handoff-sandboxd");
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
            crate::worker::kill_group(child.id() as i32);
            let _ = child.wait();
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
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
