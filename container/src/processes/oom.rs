//! A frozen process is the first the kernel's OOM killer takes. Frozen, a process only waits
//! for the chance of being used again (a session's kept agent, a spare one): when the host or
//! its sandbox runs out of memory, losing it costs a fresh start later, while losing a running
//! command or agent loses work. Its members get the highest `oom_score_adj` while frozen and
//! what they had back when thawed.

use std::fs;

/// The highest `oom_score_adj`: the OOM killer takes such a process before any other.
const FIRST_TO_GO: i32 = 1000;

/// What a frozen group's members had (pid, `oom_score_adj`), given back when it is thawed.
#[derive(Debug, Default)]
pub struct Saved(Vec<(i32, i32)>);

/// Marks every member of process group `pgid` (already stopped, so none forks meanwhile) as
/// the OOM killer's first choice; returns what they had.
pub fn mark_frozen(pgid: i32) -> Saved {
    let mut saved = Vec::new();
    for pid in members(pgid) {
        if let Some(adj) = read_adj(pid) {
            if write_adj(pid, FIRST_TO_GO) {
                saved.push((pid, adj));
            }
        }
    }
    Saved(saved)
}

/// Gives the members of `pgid` what they had before [`mark_frozen`]; false when one of them is
/// gone or dead meanwhile (the OOM killer took it): the group is then no longer whole.
pub fn restore(pgid: i32, saved: Saved) -> bool {
    let mut whole = true;
    for (pid, adj) in saved.0 {
        match stat_of(pid) {
            Some((state, group)) if group == pgid && !matches!(state, 'Z' | 'X') => {
                write_adj(pid, adj);
            }
            _ => whole = false,
        }
    }
    whole
}

/// The processes of group `pgid`, as this daemon's `/proc` numbers them.
fn members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| stat_of(*pid).is_some_and(|(_, group)| group == pgid))
        .collect()
}

/// A process's state and group: the third and fifth fields of `/proc/<pid>/stat`, read after
/// its name's last `)` (the name is in parentheses and may hold anything).
fn stat_of(pid: i32) -> Option<(char, i32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    let mut fields = fields.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

fn read_adj(pid: i32) -> Option<i32> {
    fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn write_adj(pid: i32, adj: i32) -> bool {
    fs::write(format!("/proc/{pid}/oom_score_adj"), adj.to_string()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn a_frozen_group_goes_first_and_gets_its_scores_back() {
        // A group of two: a shell and its sleep, the shell's score raised by itself to 300.
        let mut child = Command::new("sh")
            .args(["-c", "echo 300 > /proc/self/oom_score_adj; sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .expect("spawn");
        let pgid = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..100 {
            found = members(pgid);
            if found.len() == 2 && read_adj(pgid) == Some(300) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(found.len(), 2, "{found:?}");
        let before: Vec<_> = found.iter().map(|p| read_adj(*p)).collect();
        let saved = mark_frozen(pgid);
        for pid in &found {
            assert_eq!(read_adj(*pid), Some(FIRST_TO_GO));
        }
        assert!(restore(pgid, saved), "the group is whole");
        let after: Vec<_> = found.iter().map(|p| read_adj(*p)).collect();
        assert_eq!(after, before);
        assert!(before.contains(&Some(300)), "{before:?}");
        // A member killed while frozen (and left a zombie by its stopped parent): not whole.
        // SAFETY: signals to the group and the sleep this test made.
        unsafe { libc::killpg(pgid, libc::SIGSTOP) };
        let saved = mark_frozen(pgid);
        let sleep = found
            .iter()
            .copied()
            .find(|p| *p != pgid)
            .expect("the sleep");
        unsafe { libc::kill(sleep, libc::SIGKILL) };
        for _ in 0..100 {
            if stat_of(sleep).is_none_or(|(state, _)| state == 'Z') {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            !restore(pgid, saved),
            "a group that lost a member is not whole"
        );
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
}
