//! Where a stretch of the host's CPU time went: OpenCode (the agent), workerd (handoff's Worker
//! and objects), the sandbox daemon, this benchmark's own process (the scripted model, the
//! forge and the MCP client) and the rest (git, wrangler's proxy, the kernel's share of short
//! processes). Read from /proc at the start and the end; processes that ended in between count
//! only in the machine's total, so "the rest" holds them.

use std::collections::HashMap;

/// Processes' CPU seconds by pid and the machine's busy seconds, at one moment.
pub struct CpuSnapshot {
    per_pid: HashMap<u32, (Kind, f64)>,
    busy: f64,
    /// Time the hypervisor gave this machine's CPUs to others (it slows everything alike).
    steal: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Agent,
    Workerd,
    Daemon,
    Bench,
    Other,
}

impl CpuSnapshot {
    pub fn take(daemon_pid: u32) -> Self {
        let me = std::process::id();
        let mut per_pid = HashMap::new();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                let Some(secs) = cpu_secs(pid) else { continue };
                per_pid.insert(pid, (kind(pid, me, daemon_pid), secs));
            }
        }
        let (busy, steal) = machine_secs();
        CpuSnapshot {
            per_pid,
            busy,
            steal,
        }
    }

    /// CPU seconds workerd's processes (handoff's and wrangler's proxy) spent from `self` to
    /// `later`.
    pub fn workerd_until(&self, later: &CpuSnapshot) -> f64 {
        later
            .per_pid
            .iter()
            .filter(|(_, (kind, _))| *kind == Kind::Workerd)
            .map(|(pid, (_, secs))| match self.per_pid.get(pid) {
                Some((Kind::Workerd, before)) => (secs - before).max(0.0),
                _ => *secs,
            })
            .sum()
    }

    /// What was spent from `self` to `later`, as one line.
    pub fn spent_until(&self, later: &CpuSnapshot, runs: usize) -> String {
        let mut by_kind: HashMap<Kind, f64> = HashMap::new();
        for (pid, (kind, secs)) in &later.per_pid {
            let before = match self.per_pid.get(pid) {
                Some((k, s)) if k == kind => *s,
                _ => 0.0,
            };
            *by_kind.entry(*kind).or_default() += (secs - before).max(0.0);
        }
        let total = later.busy - self.busy;
        let get = |k| by_kind.get(&k).copied().unwrap_or(0.0);
        let named = get(Kind::Agent) + get(Kind::Workerd) + get(Kind::Daemon) + get(Kind::Bench);
        let per = |s: f64| s / runs.max(1) as f64;
        format!(
            "CPU {total:.1} s ({:.1} s per run): OpenCode {:.1} ({:.1} per run), workerd {:.1} ({:.2} per run), \
             daemon {:.2}, benchmark's model + forge + client {:.1}, the rest (git, wrangler, ended processes) {:.1}; \
             stolen by the hypervisor {:.1}",
            per(total),
            get(Kind::Agent),
            per(get(Kind::Agent)),
            get(Kind::Workerd),
            per(get(Kind::Workerd)),
            get(Kind::Daemon),
            get(Kind::Bench),
            (total - named).max(0.0),
            later.steal - self.steal
        )
    }
}

fn kind(pid: u32, me: u32, daemon: u32) -> Kind {
    if pid == me {
        return Kind::Bench;
    }
    if pid == daemon {
        return Kind::Daemon;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if is_opencode(&cmdline) {
        Kind::Agent
    } else if String::from_utf8_lossy(&cmdline).contains("workerd") {
        Kind::Workerd
    } else {
        Kind::Other
    }
}

/// Whether a process's command line (NUL-separated) is an OpenCode server, on the host or in a
/// sandbox.
pub fn is_opencode(cmdline: &[u8]) -> bool {
    cmdline.starts_with(b"opencode")
        || String::from_utf8_lossy(cmdline).contains("/opencode\0serve")
}

/// The fields of a live process's `/proc/<pid>/stat` after its command name (which is in
/// parentheses and may hold spaces): the state first.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split(' ').map(str::to_string).collect())
}

/// Whether `pid` is `ancestor` or one of its descendants.
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        if at == ancestor {
            return true;
        }
        // The parent's pid follows the state.
        match stat_fields(at).and_then(|f| f.get(1).and_then(|p| p.parse().ok())) {
            Some(parent) if parent > 1 => at = parent,
            _ => return false,
        }
    }
    false
}

/// Whether a live process is stopped (state `T`: frozen by its daemon).
pub fn is_stopped(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "T"))
}

/// User and system CPU seconds of one live process (its threads included).
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let fields = stat_fields(pid)?;
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks())
}

/// Seconds the machine's CPUs spent on anything but idle, I/O wait and steal, and the seconds
/// stolen, from boot.
fn machine_secs() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return (0.0, 0.0);
    };
    let values: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let field = |i: usize| values.get(i).copied().unwrap_or(0.0);
    let busy: f64 = values.iter().take(7).sum::<f64>() - field(3) - field(4);
    (busy / clock_ticks(), field(7) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}
