//! Whether sandbox users can open connections beyond loopback themselves, when the container is
//! the boundary and its network is whatever the platform gives it. In namespaces a sandbox has
//! no network device but loopback, so the egress proxy is its only way out; in a container the
//! answer depends on the runtime (the local lane's sidecar refuses every connection of a
//! non-root user beyond loopback, a platform may not) — so it is measured, not assumed.
//!
//! The probe: root listens on the container's own outward address and a thread that has
//! dropped to a sandbox user tries to connect there. That address is reached over the loopback
//! interface but is not a loopback address, so a firewall that keeps sandbox users on loopback
//! refuses it, and without one the connection succeeds at once.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the probe pretends to go to learn the outward address (nothing is sent).
const SOMEWHERE: &str = "192.0.2.1:9";

#[derive(Default)]
pub struct DirectEgress {
    /// Once seen blocked, it stays blocked (the firewall is installed before the daemon is
    /// reachable and never removed); until then every check probes again.
    blocked: AtomicBool,
}

impl DirectEgress {
    /// Whether a process of host user `uid` is refused when it connects beyond loopback.
    pub fn blocked_for(&self, uid: u32) -> bool {
        if self.blocked.load(Ordering::Relaxed) {
            return true;
        }
        let blocked = probe(uid);
        if blocked {
            self.blocked.store(true, Ordering::Relaxed);
        }
        blocked
    }
}

fn probe(uid: u32) -> bool {
    let Some(outward) = outward_address() else {
        // No route beyond loopback at all: nothing to connect to directly.
        return true;
    };
    let Ok(listener) = TcpListener::bind(SocketAddr::new(outward, 0)) else {
        return false;
    };
    let Ok(target) = listener.local_addr() else {
        return false;
    };
    // A thread of its own changes only its own credentials (raw syscalls, not the libc
    // wrappers that change every thread's), and ends right after the attempt.
    let attempt = std::thread::spawn(move || {
        // SAFETY: plain syscalls on this thread's credentials; nothing else runs on it.
        let dropped = unsafe {
            libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) == 0
                && libc::syscall(libc::SYS_setresgid, uid, uid, uid) == 0
                && libc::syscall(libc::SYS_setresuid, uid, uid, uid) == 0
        };
        dropped.then(|| TcpStream::connect_timeout(&target, Duration::from_secs(1)).is_ok())
    });
    match attempt.join() {
        Ok(Some(connected)) => !connected,
        // Could not become the sandbox user: claim nothing.
        _ => false,
    }
}

/// The address this host's connections beyond loopback leave from, if it has a route out.
fn outward_address() -> Option<std::net::IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect(SOMEWHERE).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_firewall_a_sandbox_user_connects_directly() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || outward_address().is_none() {
            // Without root the probe cannot become another user, and claims nothing.
            assert!(!probe(65534) || outward_address().is_none());
            return;
        }
        // The host running the unit tests has no firewall for uid 65534.
        assert!(!DirectEgress::default().blocked_for(65534));
    }
}
