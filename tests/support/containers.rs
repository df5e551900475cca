//! The container lane: Workers whose sandboxes run in real containers (the production path,
//! `[dev] enable_containers`), and what the tests need to look at those containers from the
//! outside through the Docker engine. `cargo xtask test` prepares the lane (engine, base and
//! sidecar images, wrangler's docker wrapper) and passes it in the environment.

use serde_json::Value;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Debian's docker CLI, the one the lane's engine matches.
const DOCKER: &str = "/usr/bin/docker";

/// What `cargo xtask test` passes to the container tests.
pub struct Lane {
    /// `[[containers]] image_vars` that build the sandbox image offline.
    pub image_vars: String,
    /// The sidecar's forwarder, as the daemon in a container reaches it.
    pub upstream_proxy: String,
}

/// The lane, or a panic that says how to get one.
pub fn lane() -> &'static Lane {
    static LANE: OnceLock<Lane> = OnceLock::new();
    LANE.get_or_init(|| {
        let get = |key: &str| {
            std::env::var(key).unwrap_or_else(|_| {
                panic!(
                    "{key} is not set: the container tests run in the container lane of \
                     `cargo xtask test`, which installs and starts what they need"
                )
            })
        };
        Lane {
            image_vars: get("HANDOFF_CONTAINER_IMAGE_VARS"),
            upstream_proxy: get("HANDOFF_CONTAINER_UPSTREAM_PROXY"),
        }
    })
}

/// Runs the docker CLI and returns its standard output (panics with its error if it fails).
pub fn docker(args: &[&str]) -> String {
    let out = Command::new(DOCKER)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{DOCKER}: {e}"));
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running container as `docker inspect` describes it.
pub struct Container {
    pub id: String,
    pub inspect: Value,
}

impl Container {
    /// The container's environment, `KEY=value` entries.
    pub fn env(&self) -> Vec<String> {
        self.inspect["Config"]["Env"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The image it runs (wrangler names the image of each container class after the class).
    pub fn image(&self) -> String {
        self.inspect["Config"]["Image"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The value of one variable of its environment.
    pub fn var(&self, key: &str) -> Option<String> {
        let prefix = format!("{key}=");
        self.env()
            .into_iter()
            .find_map(|e| e.strip_prefix(&prefix).map(str::to_string))
    }

    /// Where the container's network namespace can be reached from the host: the bridge
    /// address of the sidecar whose namespace it joined.
    pub fn network_address(&self) -> String {
        let mode = self.inspect["HostConfig"]["NetworkMode"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let owner = mode.strip_prefix("container:").unwrap_or(&self.id);
        let inspected = inspect(owner).expect("the network's owner");
        inspected["NetworkSettings"]["IPAddress"]
            .as_str()
            .filter(|a| !a.is_empty())
            .expect("a bridge address")
            .to_string()
    }

    /// Runs `command` in the container as `user` and returns (exit code, stdout + stderr).
    pub fn exec(&self, user: &str, command: &str) -> (i32, String) {
        let out = Command::new(DOCKER)
            .args(["exec", "-u", user, &self.id, "sh", "-c", command])
            .output()
            .expect("docker exec");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), text)
    }

    /// Removes the container at once (as when its host fails).
    pub fn kill(&self) {
        docker(&["rm", "-f", &self.id]);
    }
}

fn inspect(id: &str) -> Option<Value> {
    let out = Command::new(DOCKER).args(["inspect", id]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let parsed: Value = serde_json::from_slice(&out.stdout).ok()?;
    parsed.as_array()?.first().cloned()
}

/// Every running container that serves sandbox `sandbox_id` (its daemon was started for it).
pub fn containers_of(sandbox_id: &str) -> Vec<Container> {
    let wanted = format!("HANDOFF_SANDBOX_ID={sandbox_id}");
    docker(&["ps", "-q", "--no-trunc"])
        .split_whitespace()
        .filter_map(|id| {
            let inspect = inspect(id)?;
            let container = Container {
                id: id.to_string(),
                inspect,
            };
            container.env().contains(&wanted).then_some(container)
        })
        .collect()
}

/// The one running container of `sandbox_id`.
pub fn container_of(sandbox_id: &str) -> Container {
    let mut found = containers_of(sandbox_id);
    assert_eq!(found.len(), 1, "containers of {sandbox_id}");
    found.remove(0)
}

/// Waits until no container serves `sandbox_id`.
pub fn wait_gone(sandbox_id: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if containers_of(sandbox_id).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// What the sidecar's ingress (port 39001 of a container's network namespace) hands workerd:
/// a stream to the sandbox daemon on 127.0.0.1:3000. Sends one `GET path` with `token` down it
/// and returns the daemon's status and body — how anything on the bridge (another container,
/// a compromised neighbour) could try to reach a sandbox's daemon directly.
pub async fn daemon_through_ingress(address: &str, path: &str, token: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect((address, 39001))
        .await
        .expect("connect to the ingress");
    stream
        .write_all(b"CONNECT 127.0.0.1:3000 HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n")
        .await
        .expect("write CONNECT");
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200"), "CONNECT answered {head}");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

async fn read_head(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}
