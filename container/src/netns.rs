//! Sockets inside a sandbox's network namespace. A fresh thread joins the namespace of a
//! sandbox process (`setns`), creates the socket and exits; the socket stays in that namespace
//! and is then used from the async runtime like any other. Pooled threads never change
//! namespace.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Runs `f` on a new thread inside the network namespace of `pid`.
fn in_netns<T, F>(pid: u32, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    std::thread::spawn(move || {
        let ns = File::open(format!("/proc/{pid}/ns/net"))?;
        // SAFETY: setns on this thread only; the fd is valid for the call.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("network namespace thread panicked"))?
}

/// A listener on `127.0.0.1:port` inside the namespace of `pid` (or on the host for `None`).
pub fn listen(pid: Option<u32>, port: u16) -> io::Result<TcpListener> {
    let bind = move || {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        Ok(listener)
    };
    match pid {
        Some(pid) => in_netns(pid, bind),
        None => bind(),
    }
}

/// Connects to `127.0.0.1:port` inside the namespace of `pid` (or on the host for `None`).
pub async fn connect(pid: Option<u32>, port: u16) -> io::Result<tokio::net::TcpStream> {
    let dial = move || {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nonblocking(true)?;
        Ok(stream)
    };
    let stream = tokio::task::spawn_blocking(move || match pid {
        Some(pid) => in_netns(pid, dial),
        None => dial(),
    })
    .await
    .map_err(|_| io::Error::other("connect task failed"))??;
    tokio::net::TcpStream::from_std(stream)
}
