//! Process groups: every command the daemon starts leads its own (`process_group(0)`), and is
//! signalled, and stopped, as a whole.

use std::time::Duration;

/// How long a process group has between SIGTERM and SIGKILL when it is stopped.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

pub fn signal(pgid: i32, sig: i32) {
    // SAFETY: pgid leads a group this daemon created with `process_group(0)`.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Whether process group `pgid` has no member left, waited for up to `limit`. A shell that
/// leads a group often ends at SIGTERM before what it started has cleaned up (git removing its
/// lock): the whole group gets the grace, not its leader alone.
pub async fn gone_within(pgid: i32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // SAFETY: signal 0 sends nothing; it only tells whether the group has a member.
        let gone = unsafe { libc::killpg(pgid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
