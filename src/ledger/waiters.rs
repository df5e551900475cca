//! Calls waiting inside the ledger for a run to change (`await_run`, what `opencode_wait` asks):
//! each holds a one-shot wake-up under its run's id, sent when an op or the watchdog writes that
//! run. A wake-up only makes the waiter read its run again, and every wait is bounded by its own
//! deadline, so a write path that forgets to wake delays a waiter until then and never loses it.
//! Held in memory only: a call waiting on an instance that goes away fails with it, like any
//! call to it.

use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;

/// More waiting calls than this on one run and the oldest are woken at once (they read again
/// and come back), so a flood of waits cannot grow the map without bound.
const MAX_PER_RUN: usize = 1_000;

#[derive(Default)]
pub struct Waiters(RefCell<HashMap<String, Vec<oneshot::Sender<()>>>>);

impl Waiters {
    /// A wake-up for the next write of `run_id`.
    pub fn register(&self, run_id: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut map = self.0.borrow_mut();
        let list = map.entry(run_id.to_string()).or_default();
        // Waits that ended by their deadline dropped their receivers.
        list.retain(|w| !w.is_canceled());
        if list.len() >= MAX_PER_RUN {
            for w in list.drain(..list.len() / 2) {
                let _ = w.send(());
            }
        }
        list.push(tx);
        rx
    }

    /// Wakes every call waiting on `run_id`.
    pub fn wake(&self, run_id: &str) {
        let woken = self.0.borrow_mut().remove(run_id);
        for w in woken.into_iter().flatten() {
            let _ = w.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(rx: &mut oneshot::Receiver<()>) -> bool {
        matches!(rx.try_recv(), Ok(Some(())))
    }

    #[test]
    fn a_write_wakes_the_calls_waiting_on_its_run_only() {
        let waiters = Waiters::default();
        let (mut a1, mut a2, mut b) = (
            waiters.register("run_a"),
            waiters.register("run_a"),
            waiters.register("run_b"),
        );
        waiters.wake("run_a");
        assert!(woken(&mut a1) && woken(&mut a2));
        assert!(!woken(&mut b));
        assert!(!waiters.0.borrow().contains_key("run_a"));
        waiters.wake("run_b");
        assert!(woken(&mut b));
    }

    #[test]
    fn ended_waits_are_dropped_and_a_flood_is_bounded() {
        let waiters = Waiters::default();
        drop(waiters.register("run_a"));
        let mut kept = waiters.register("run_a");
        assert_eq!(
            waiters.0.borrow()["run_a"].len(),
            1,
            "the ended wait is gone"
        );
        let mut flood: Vec<_> = (0..MAX_PER_RUN)
            .map(|_| waiters.register("run_a"))
            .collect();
        assert!(waiters.0.borrow()["run_a"].len() <= MAX_PER_RUN);
        assert!(woken(&mut kept), "the oldest are woken to make room");
        waiters.wake("run_a");
        assert!(flood
            .iter_mut()
            .all(|rx| !matches!(rx.try_recv(), Ok(None))));
    }
}
