//! A headless Chromium for the page tests, in a process group of its own that the tests stop
//! (Drop) — started here rather than by the Node script, so a script that dies leaves nothing
//! running. Scripts reach it over the DevTools protocol (`puppeteer-core`'s `connect`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Chromium (installed by `cargo xtask setup`).
pub const CHROMIUM: &str = "/usr/bin/chromium";

pub struct Browser {
    child: Child,
    /// The DevTools WebSocket URL.
    pub ws: String,
    dir: PathBuf,
}

impl Browser {
    pub fn start() -> Browser {
        let dir = crate::scratch_dir("chromium");
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless=new",
                // Tests run as root here, where Chromium's own sandbox cannot start; the
                // browser only opens this test's pages on 127.0.0.1.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", dir.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start chromium (cargo xtask setup installs it)");
        crate::reaper::guard(child.id() as i32, &dir);
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split("DevTools listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let ws = loop {
            if let Ok(url) = rx.recv_timeout(Duration::from_millis(200)) {
                break url;
            }
            assert!(Instant::now() < deadline, "chromium did not start");
        };
        Browser { child, ws, dir }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        crate::worker::end_group_of(&mut self.child);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
