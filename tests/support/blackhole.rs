//! A TCP server that accepts connections and never answers: the stand-in for a sandbox backend
//! that has hung, so runs stall and the watchdog has something to catch.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct BlackHole {
    pub port: u16,
}

impl BlackHole {
    /// Listens on a free loopback port for the life of the process.
    pub fn start() -> BlackHole {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind black hole");
        let port = listener.local_addr().expect("addr").port();
        let held = Arc::new(Mutex::new(Vec::new()));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                // Keep the connection open and silent.
                if let Ok(mut streams) = held.lock() {
                    streams.push(stream);
                }
            }
        });
        BlackHole { port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}
