//! Running commands: checked runs, captured output, and long-lived servers started in their own
//! process group so that stopping them stops every process they started.

use crate::Result;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command to completion, failing on a non-zero exit.
pub fn run(cmd: &mut Command) -> Result {
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(cmd)))
    }
}

/// stdout of a successful command, or `None`.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// A server running in its own process group; dropping it stops the whole group.
pub struct Server {
    child: Child,
    name: String,
}

impl Server {
    pub fn spawn(name: &str, cmd: &mut Command) -> Result<Server> {
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("could not start {name}: {e}"))?;
        Ok(Server {
            child,
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's stdout, if it was piped.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// `Some(status)` once the server has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group, then SIGKILL if it is still there after a grace period.
    pub fn stop(&mut self) {
        let pgid = self.child.id() as i32;
        signal_group(pgid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exited().is_some() && !group_alive(pgid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("xtask: {} did not stop in time; killing it", self.name);
        signal_group(pgid, libc::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.exited().is_none() || group_alive(self.child.id() as i32) {
            self.stop();
        }
    }
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: killpg only sends a signal; pgid is the group this process created for the child.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

/// Polls `http://127.0.0.1:<port><path>` until it answers 200 or the timeout passes.
pub fn wait_for_http(port: u16, path: &str, timeout: Duration, server: &mut Server) -> Result {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = server.exited() {
            return Err(format!(
                "{} exited before it was ready ({status})",
                server.name
            ));
        }
        if http_get_status(port, path) == Some(200) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "{} did not answer on port {port} within {} s",
        server.name,
        timeout.as_secs()
    ))
}

/// The status code of a plain HTTP/1.1 GET, or `None` if nothing answered.
pub fn http_get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split_whitespace().nth(1)?.parse().ok()
}
