//! A test process killed by a signal leaves no server behind: its guard ends them.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only probes whether the group exists.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

#[test]
fn the_servers_of_a_test_process_killed_by_a_signal_are_stopped_and_their_files_removed() {
    let mut orphan = Command::new(env!("CARGO_BIN_EXE_handoff-test-orphan"))
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start handoff-test-orphan");
    let mut line = String::new();
    let stdout = orphan.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its daemon");
    let (pgid, dir) = line.trim().split_once(' ').expect("`<pgid> <dir>`");
    let (pgid, dir): (i32, PathBuf) = (pgid.parse().expect("a pgid"), dir.into());
    assert!(
        alive(pgid) && dir.exists(),
        "the daemon runs in {}",
        dir.display()
    );

    // SAFETY: the process this test started, in a group of its own.
    unsafe { libc::kill(orphan.id() as i32, libc::SIGKILL) };
    let _ = orphan.wait();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (alive(pgid) || dir.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = alive(pgid);
    if left {
        // SAFETY: the daemon's group, still ours: clean up before failing.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    assert!(!left, "the daemon outlived the process that started it");
    assert!(!dir.exists(), "{} was left behind", dir.display());
}
