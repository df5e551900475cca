//! Resident memory while runs work, read from /proc every 200 ms by a thread: OpenCode (the
//! agent, every server on the host), workerd (handoff's Worker and objects, with wrangler's
//! proxy) and the sandbox daemon. Each figure is kept at its start and its peak, so a round of
//! runs reports what it added over what was already resident (kept agents of earlier rounds
//! included in the start, not in the growth).

use handoff_tests::procs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What one sample sums, in KiB.
#[derive(Clone, Copy, Default)]
pub struct Resident {
    /// Every OpenCode process together.
    pub agents: u64,
    /// The largest OpenCode process.
    pub largest_agent: u64,
    pub workerd: u64,
    pub daemon: u64,
}

impl Resident {
    /// What is resident now; `worker_pgid` is wrangler's process group (its workerd processes).
    pub fn now(daemon_pid: i32, worker_pgid: i32) -> Resident {
        let mut r = Resident::default();
        for p in procs::all() {
            if p.pid == daemon_pid {
                r.daemon = p.rss_kib;
            } else if p.pgrp == worker_pgid && p.name.starts_with("workerd") {
                r.workerd += p.rss_kib;
            } else if is_opencode(p.pid) {
                r.agents += p.rss_kib;
                r.largest_agent = r.largest_agent.max(p.rss_kib);
            }
        }
        r
    }
}

/// Whether a live process is an OpenCode server, on the host or in a sandbox.
pub fn is_opencode(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| crate::cpu::is_opencode(&c))
}

/// Samples [`Resident`] until [`Sampler::finish`], keeping each figure's peak.
pub struct Sampler {
    start: Resident,
    running: Arc<AtomicBool>,
    peaks: Arc<[AtomicU64; 4]>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub fn start(daemon_pid: i32, worker_pgid: i32) -> Sampler {
        let start = Resident::now(daemon_pid, worker_pgid);
        let running = Arc::new(AtomicBool::new(true));
        let peaks: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
        let thread = {
            let (running, peaks) = (running.clone(), peaks.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::SeqCst) {
                    let r = Resident::now(daemon_pid, worker_pgid);
                    for (peak, value) in
                        peaks
                            .iter()
                            .zip([r.agents, r.largest_agent, r.workerd, r.daemon])
                    {
                        peak.fetch_max(value, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Sampler {
            start,
            running,
            peaks,
            thread: Some(thread),
        }
    }

    /// Stops sampling: the figures at the start and their peaks since.
    pub fn finish(mut self) -> (Resident, Resident) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let peak = |i: usize| self.peaks[i].load(Ordering::SeqCst);
        let peak = Resident {
            agents: peak(0),
            largest_agent: peak(1),
            workerd: peak(2),
            daemon: peak(3),
        };
        (self.start, peak)
    }
}

/// What the Worker held and served over a stretch: its wasm heap before and after (MiB) and
/// how many requests it served in between.
pub struct WorkerSide {
    pub wasm: (f64, f64),
    pub requests: usize,
}

/// One line: what `runs` runs at once added at their peak over the start, in all and per run.
pub fn growth_line(start: Resident, peak: Resident, runs: usize, worker: WorkerSide) -> String {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let grew = |from: u64, to: u64| mib(to.saturating_sub(from));
    let per = |v: f64| v / runs.max(1) as f64;
    let (agents, workerd, daemon) = (
        grew(start.agents, peak.agents),
        grew(start.workerd, peak.workerd),
        grew(start.daemon, peak.daemon),
    );
    format!(
        "memory at the peak over the start: OpenCode +{agents:.0} MiB ({:.0} per run, largest \
         process {:.0}), workerd +{workerd:.1} MiB ({:.1} per run, {:.0} resident; it served {} \
         requests, {:.0} per run), \
         daemon +{daemon:.1} MiB ({:.2} per run; {:.1} resident); handoff's own wasm heap \
         {:.1} → {:.1} MiB",
        per(agents),
        mib(peak.largest_agent),
        per(workerd),
        mib(peak.workerd),
        worker.requests,
        per(worker.requests as f64),
        per(daemon),
        mib(peak.daemon),
        worker.wasm.0,
        worker.wasm.1
    )
}
