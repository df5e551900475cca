//! A TCP relay between the Worker and the sandbox daemon that can cut the network: while cut,
//! nothing crosses in either direction — bytes on open connections are held back and new
//! connections are accepted and left silent, as a network partition looks to both ends (no
//! reset, no refusal, just nothing). Healing drops what was held (those connections timed out
//! at their ends meanwhile) and relays new connections again. It can also cut itself the moment
//! a request carrying given bytes is answered: the request arrived, its reply is lost. Or it
//! can refuse: open connections are closed and new ones closed as they come, as a daemon that
//! is restarting looks (every call fails at once instead of timing out).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Line {
    cut: AtomicBool,
    /// Connections are closed as they come ([`Relay::refuse`]).
    refusing: AtomicBool,
    /// Counts the cuts: a connection that lived through one is dropped when it heals.
    cuts: AtomicU64,
    stopped: AtomicBool,
    /// Bytes whose request's reply cuts the line ([`Relay::cut_at_reply_to`]).
    trip: Mutex<Option<Vec<u8>>>,
}

impl Line {
    fn cut(&self) {
        self.cuts.fetch_add(1, Ordering::SeqCst);
        self.cut.store(true, Ordering::SeqCst);
    }
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
        self.line.cut();
    }

    /// Cuts the line as the reply to the next request carrying `needle` starts to come back:
    /// the far end got the request and acted on it, the near end never hears so.
    pub fn cut_at_reply_to(&self, needle: &str) {
        if let Ok(mut trip) = self.line.trip.lock() {
            *trip = Some(needle.as_bytes().to_vec());
        }
    }

    /// Whether the line is cut now.
    pub fn is_cut(&self) -> bool {
        self.line.cut.load(Ordering::SeqCst)
    }

    /// Closes every open connection and, until healed, each new one as it comes.
    pub fn refuse(&self) {
        self.line.refusing.store(true, Ordering::SeqCst);
        self.line.cuts.fetch_add(1, Ordering::SeqCst);
    }

    /// Mends the line: connections held through the cut are dropped, new ones relayed.
    pub fn heal(&self) {
        self.line.refusing.store(false, Ordering::SeqCst);
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
    if line.refusing.load(Ordering::SeqCst) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
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
    // Set once a request on this connection carried the trip's bytes: its reply cuts the line.
    let tripped = Arc::new(AtomicBool::new(false));
    let up = {
        let (line, tripped) = (line.clone(), tripped.clone());
        std::thread::spawn(move || pump(client_in, server, &line, born, Watch::Requests(&tripped)))
    };
    pump(server_in, client, &line, born, Watch::Replies(&tripped));
    let _ = up.join();
}

/// What a pump watches its bytes for.
enum Watch<'a> {
    /// Requests carrying the trip's bytes (then sets the flag).
    Requests(&'a AtomicBool),
    /// The flag set: the reply it starts cuts the line.
    Replies(&'a AtomicBool),
}

impl Watch<'_> {
    /// Looks at bytes about to cross (`seen`: what crossed before, kept to find bytes split
    /// between two reads).
    fn look(&self, line: &Line, seen: &mut Vec<u8>, bytes: &[u8]) {
        match self {
            Watch::Requests(tripped) => {
                let Ok(mut trip) = line.trip.lock() else {
                    return;
                };
                let Some(needle) = trip.as_ref() else { return };
                let width = needle.len();
                seen.extend_from_slice(bytes);
                if seen.windows(width).any(|w| w == needle.as_slice()) {
                    *trip = None;
                    tripped.store(true, Ordering::SeqCst);
                }
                seen.drain(..seen.len().saturating_sub(width));
            }
            Watch::Replies(tripped) => {
                if tripped.swap(false, Ordering::SeqCst) {
                    line.cut();
                }
            }
        }
    }
}

/// Copies `from` to `to` until either closes, holding bytes back while the line is cut.
fn pump(mut from: TcpStream, mut to: TcpStream, line: &Line, born: u64, watch: Watch) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 16 * 1024];
    let mut seen = Vec::new();
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
        watch.look(line, &mut seen, &buf[..n]);
        if !wait_out(line, born) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
