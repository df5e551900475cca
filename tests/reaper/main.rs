//! `handoff-test-reaper`: the guard of one test process's servers (see `support/reaper.rs`).
//! Reads `+ <pgid> <dir>` / `- <pgid>` lines on stdin; once stdin closes, ends the groups still
//! guarded (SIGTERM, up to 5 s, then SIGKILL) and removes their directories. A group that ended
//! meanwhile is forgotten at once (checked every second): its id may then go to someone else's
//! process, which must never be signalled.

use handoff_tests::reaper::Told;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

fn main() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut groups: BTreeMap<i32, PathBuf> = BTreeMap::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => match Told::parse(&line) {
                Some(Told::Guard(pgid, dir)) => {
                    groups.insert(pgid, dir);
                }
                Some(Told::Release(pgid)) => {
                    groups.remove(&pgid);
                }
                None => eprintln!("handoff-test-reaper: not understood: {line:?}"),
            },
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        groups.retain(|pgid, _| alive(*pgid));
    }
    for (pgid, dir) in groups {
        end(pgid);
        handoff_tests::remove_scratch(&dir);
    }
}

/// Whether any process of group `pgid` is left.
fn alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only probes whether the group exists.
    pgid > 1 && unsafe { libc::killpg(pgid, 0) } == 0
}

fn end(pgid: i32) {
    // SAFETY: a group this process was told of and that never ended since (checked every
    // second), so its id is still that group's.
    unsafe { libc::killpg(pgid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pgid) {
        // SAFETY: as above.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}
