//! The guard of the servers this process starts. Each server runs in a process group of its
//! own, stopped by the test that started it or at exit; a process killed by a signal (a
//! harness's timeout, SIGKILL) runs neither. So the first server started also starts a guard
//! (`handoff-test-reaper`, in a group of its own) that holds the read end of a pipe from this
//! process: told of each group as it starts and stops, it ends the groups still running — and
//! removes their scratch directories — when the pipe closes without them being stopped, that
//! is when this process is gone.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The guard and the write end of its pipe; `None` until a server starts, or when the guard
/// could not be started (not built: this process then stops its servers itself only).
static GUARD: Mutex<Option<(Child, ChildStdin)>> = Mutex::new(None);

/// Ends group `pgid` and removes `dir` should this process end without stopping the group.
pub fn guard(pgid: i32, dir: &Path) {
    tell(&format!("+ {pgid} {}", dir.display()));
}

/// Group `pgid` was stopped: not the guard's to end any more (its id may be reused).
pub fn release(pgid: i32) {
    tell(&format!("- {pgid}"));
}

fn tell(line: &str) {
    let Ok(mut guard) = GUARD.lock() else {
        return;
    };
    if guard.is_none() {
        *guard = start();
    }
    if let Some((_, pipe)) = guard.as_mut() {
        let _ = writeln!(pipe, "{line}");
    }
}

fn start() -> Option<(Child, ChildStdin)> {
    let mut child = Command::new(binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| eprintln!("no guard for this process's servers ({e}): build the test bins"))
        .ok()?;
    let pipe = child.stdin.take()?;
    Some((child, pipe))
}

fn binary() -> PathBuf {
    crate::root().join("target/debug/handoff-test-reaper")
}

/// One line the guard is told: a group to end if the pipe closes (with its scratch directory),
/// or one no longer to end.
#[derive(Debug, PartialEq)]
pub enum Told {
    Guard(i32, PathBuf),
    Release(i32),
}

impl Told {
    pub fn parse(line: &str) -> Option<Told> {
        let (sign, rest) = line.split_at_checked(2)?;
        match sign {
            "+ " => {
                let (pgid, dir) = rest.split_once(' ')?;
                Some(Told::Guard(pgid.parse().ok()?, PathBuf::from(dir)))
            }
            "- " => Some(Told::Release(rest.trim().parse().ok()?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_nonsense_does_not() {
        assert_eq!(
            Told::parse("+ 42 /tmp/handoff-it-1-0"),
            Some(Told::Guard(42, PathBuf::from("/tmp/handoff-it-1-0")))
        );
        assert_eq!(Told::parse("- 42"), Some(Told::Release(42)));
        for bad in ["", "+", "+ 42", "* 42", "- x", "+ x /tmp"] {
            assert_eq!(Told::parse(bad), None, "{bad:?}");
        }
    }
}
