//! Ending a stopped sandbox's last processes. Killing its init ends its PID namespace (the
//! kernel kills the rest asynchronously), but a sandbox without one — in a container, the
//! container is the boundary — has no such net: a process that left its process group for a
//! session of its own would outlive the stop. There the container is the sandbox's alone, and
//! so are its user's processes: what is left is ended by user.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Waits (at most 5 s) until no process runs as `uid`, a sandbox's own host user; in a container
/// of the sandbox's own (`dedicated`), ends them too. A zombie does not count: it runs nothing
/// and holds no file, and one whose parent died waits for whatever reaps orphans (on some hosts
/// seconds later). Outside such a container the init's PID namespace takes the rest with it,
/// and a kill by user would reach too far: the daemon's claim keeps a second daemon off its
/// base, not off every user its range may grow into.
pub async fn end_all_of(uid: u32, dedicated: bool) {
    for attempt in 0..250 {
        if !runs_as(uid) {
            return;
        }
        // At once, then every 200 ms for what the kernel has not ended by itself.
        if dedicated && attempt % 10 == 0 {
            kill_every_process_of(uid).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "handoff-sandboxd: processes of user {uid} still run 5 s after their sandbox stopped"
    );
}

/// SIGKILL to every process of `uid`: a helper becomes that user and sends it to every process
/// it may signal (`kill(-1)`), which is exactly the user's own. The kernel signals them all in
/// one walk that no fork can slip past. Never for root or the daemon's own user.
async fn kill_every_process_of(uid: u32) {
    // SAFETY: geteuid has no preconditions.
    if uid == 0 || uid == unsafe { libc::geteuid() } {
        return;
    }
    let mut helper = tokio::process::Command::new("/bin/true");
    helper.uid(uid).gid(uid);
    // SAFETY: runs in the forked child, already that user, before exec: only kill and _exit,
    // both async-signal-safe. kill(-1) spares the caller; _exit ends it without the exec.
    unsafe {
        helper.pre_exec(|| {
            libc::kill(-1, libc::SIGKILL);
            libc::_exit(0)
        });
    }
    match helper.status().await {
        Ok(_) => {}
        Err(e) => eprintln!("handoff-sandboxd: could not end the processes of user {uid}: {e}"),
    }
}

/// Whether a process other than a zombie runs as `uid`.
fn runs_as(uid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let is_pid = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid && e.metadata().is_ok_and(|m| m.uid() == uid) && !finished(&e.path())
    })
}

/// Whether the process at `/proc/<pid>` is a zombie or already gone. Every thread counts: a
/// leader that ended with `pthread_exit` shows as a zombie while its other threads run on.
fn finished(proc_dir: &Path) -> bool {
    let Ok(threads) = std::fs::read_dir(proc_dir.join("task")) else {
        return true;
    };
    threads.flatten().all(|t| thread_finished(&t.path()))
}

/// A thread's state is the field after its name in `stat` (the name may hold spaces and
/// parentheses, so after the last `)`).
fn thread_finished(task_dir: &Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(task_dir.join("stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    matches!(state, Some('Z' | 'X'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_finished_and_a_live_process_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("0")
            .spawn()
            .expect("spawn sleep");
        let dir = Path::new("/proc").join(child.id().to_string());
        // Not waited for, it stays a zombie once it exits.
        let mut zombie = false;
        for _ in 0..200 {
            zombie = finished(&dir);
            if zombie {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(zombie, "an exited, unreaped child counts as finished");
        assert!(dir.exists(), "its /proc entry is still there");
        child.wait().expect("reap");
        assert!(finished(&dir), "a reaped one is gone");
        assert!(
            !finished(Path::new("/proc/self")),
            "this very process is live"
        );
    }

    #[test]
    fn a_user_left_with_only_a_zombie_runs_nothing() {
        use std::os::unix::process::CommandExt;
        assert!(
            crate::sandbox::privileged(),
            "runs as root, as the daemon's isolation and its tests do"
        );
        // A user no sandbox or host account has.
        const UID: u32 = 3_999_999;
        let as_user = |program: &str, arg: &str| {
            std::process::Command::new(program)
                .arg(arg)
                .uid(UID)
                .gid(UID)
                .spawn()
                .expect("spawn as the test user")
        };
        let mut ended = as_user("sleep", "0");
        let dir = Path::new("/proc").join(ended.id().to_string());
        for _ in 0..200 {
            if finished(&dir) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!runs_as(UID), "only a zombie of the user is left");
        let mut live = as_user("sleep", "5");
        assert!(runs_as(UID), "a sleeping process runs");
        let _ = live.kill();
        live.wait().expect("reap");
        ended.wait().expect("reap");
    }

    #[tokio::test]
    async fn ending_a_user_ends_its_processes_in_other_sessions_and_no_one_elses() {
        use std::os::unix::process::CommandExt;
        assert!(crate::sandbox::privileged(), "runs as root");
        const UID: u32 = 3_999_997;
        const NEIGHBOUR: u32 = 3_999_996;
        let as_user = |uid: u32, script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .uid(uid)
                .gid(uid)
                .spawn()
                .expect("spawn as a test user")
        };
        // One in the spawned group, one that left it for a session of its own.
        let mut own = as_user(UID, "setsid sleep 60 & exec sleep 60");
        let mut neighbour = as_user(NEIGHBOUR, "exec sleep 60");
        for _ in 0..200 {
            if count_of(UID) == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(count_of(UID), 2, "both of the user's processes run");
        end_all_of(UID, true).await;
        let left = runs_as(UID);
        let untouched = runs_as(NEIGHBOUR);
        // Whatever the outcome, nothing of the test's users is left behind.
        for pid in pids_of(UID).into_iter().chain(pids_of(NEIGHBOUR)) {
            // SAFETY: a signal to a process of one of this test's own users.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for child in [&mut own, &mut neighbour] {
            let _ = child.kill();
            child.wait().expect("reap");
        }
        assert!(!left, "the user has no process left");
        assert!(untouched, "another user's process is untouched");
    }

    /// The live processes of `uid`.
    fn pids_of(uid: u32) -> Vec<i32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid) && !finished(&e.path()))
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect()
    }

    fn count_of(uid: u32) -> usize {
        pids_of(uid).len()
    }

    #[test]
    fn a_leader_that_ended_alone_while_its_threads_run_on_is_not_finished() {
        // The main thread leaves with pthread_exit; a second thread sleeps on for 3 s.
        let script = "import threading, ctypes, time\n\
            threading.Thread(target=time.sleep, args=(3,)).start()\n\
            ctypes.CDLL(None).pthread_exit(None)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .spawn()
            .expect("spawn python3");
        let dir = Path::new("/proc").join(child.id().to_string());
        let leader_is_zombie = || {
            std::fs::read_to_string(dir.join("stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        let mut seen = false;
        for _ in 0..200 {
            seen = leader_is_zombie();
            if seen {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(seen, "the leader shows as a zombie");
        assert!(!finished(&dir), "its sleeping thread still runs");
        child.wait().expect("reap");
    }
}
