//! Waiting for a stopped sandbox's last processes: the kernel kills what is left of a PID
//! namespace after its init, asynchronously.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Waits (at most 5 s) until no process runs as `uid`, a sandbox's own host user. A zombie does
/// not count: it runs nothing and holds no file, and one whose parent died waits for whatever
/// reaps orphans here (on some hosts seconds later, in a container without an init never).
pub async fn wait_until_gone(uid: u32) {
    for _ in 0..250 {
        if !runs_as(uid) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    eprintln!(
        "handoff-sandboxd: processes of user {uid} still run 5 s after their sandbox stopped"
    );
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
