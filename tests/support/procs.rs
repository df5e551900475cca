//! What the host's `/proc` says about the stack's processes: resident memory of a process
//! group's members and of a process's descendants, for the soak's memory curve and its check
//! that nothing was left running.

use std::collections::BTreeMap;

/// One process: its parent, process group, name and resident memory.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub name: String,
    pub rss_kib: u64,
}

/// Every process on the host that `/proc` shows (those gone while reading are skipped).
pub fn all() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read)
        .collect()
}

fn read(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (name) state ppid pgrp …`: the name may hold spaces and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat[open + 1..close].to_string();
    let mut rest = stat[close + 1..].split_whitespace().skip(1);
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgrp,
        name,
        rss_kib: pages * page_kib(),
    })
}

fn page_kib() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (size.max(4096) as u64) / 1024
}

/// The members of process group `pgrp`.
pub fn group(procs: &[Proc], pgrp: i32) -> Vec<Proc> {
    procs.iter().filter(|p| p.pgrp == pgrp).cloned().collect()
}

/// Every descendant of `pid` (children, their children, …), not `pid` itself.
pub fn descendants(procs: &[Proc], pid: i32) -> Vec<Proc> {
    let mut children: BTreeMap<i32, Vec<&Proc>> = BTreeMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(parent) = stack.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            stack.push(child.pid);
            out.push((*child).clone());
        }
    }
    out
}

/// Resident memory of `procs` together, in MiB.
pub fn rss_mib(procs: &[Proc]) -> f64 {
    procs.iter().map(|p| p.rss_kib).sum::<u64>() as f64 / 1024.0
}
