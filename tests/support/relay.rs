//! A TCP relay between the Worker and the sandbox daemon that can cut the network: while cut,
//! nothing crosses in either direction — bytes on open connections are held back and new
//! connections are accepted and left silent, as a network partition looks to both ends (no
//! reset, no refusal, just nothing). Healing drops what was held (those connections timed out
//! at their ends meanwhile) and relays new connections again.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct Line {
    cut: AtomicBool,
    /// Counts the cuts: a connection that lived through one is dropped when it heals.
    cuts: AtomicU64,
    stopped: AtomicBool,
}

pub struct Relay {
    pub port: u16,
    line: Arc<Line>,
}

impl Relay {
    /// Relays 127.0.0.1:`port` (a free one) to 127.0.0.1:`target`.
    pub fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
        let port = listener.local_addr().expect("relay address").port();
        let line = Arc::new(Line::default());
        let shared = line.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if shared.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let line = shared.clone();
                std::thread::spawn(move || connect(client, target, line));
            }
        });
        Relay { port, line }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Cuts the line: from now on nothing crosses.
    pub fn cut(&self) {
        self.line.cuts.fetch_add(1, Ordering::SeqCst);
        self.line.cut.store(true, Ordering::SeqCst);
    }

    /// Mends the line: connections held through the cut are dropped, new ones relayed.
    pub fn heal(&self) {
        self.line.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.line.stopped.store(true, Ordering::SeqCst);
        self.heal();
        // Wakes the accept loop so it sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Holds a connection silent while the line is cut; false once it must be dropped (it lived
/// through a cut, or the relay stopped).
fn wait_out(line: &Line, born: u64) -> bool {
    while line.cut.load(Ordering::SeqCst) && !line.stopped.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    line.cuts.load(Ordering::SeqCst) == born && !line.stopped.load(Ordering::SeqCst)
}

fn connect(client: TcpStream, target: u16, line: Arc<Line>) {
    let born = line.cuts.load(Ordering::SeqCst);
    if !wait_out(&line, born) {
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = {
        let line = line.clone();
        std::thread::spawn(move || pump(client_in, server, &line, born))
    };
    pump(server_in, client, &line, born);
    let _ = up.join();
}

/// Copies `from` to `to` until either closes, holding bytes back while the line is cut.
fn pump(mut from: TcpStream, mut to: TcpStream, line: &Line, born: u64) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if line.cut.load(Ordering::SeqCst) && !wait_out(line, born) {
                    break;
                }
                if line.cuts.load(Ordering::SeqCst) != born || line.stopped.load(Ordering::SeqCst) {
                    break;
                }
                continue;
            }
            Err(_) => break,
        };
        if !wait_out(line, born) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
