//! Calls waiting inside the ledger for something to change: `await_run` (what `opencode_wait`
//! asks) on its run, a stream's `changes` on the runs it watches and on its MCP session. Each
//! holds a one-shot wake-up under a key — a run's id, or [`session_key`] — sent when an op or the
//! watchdog writes that run, moves a task of that session, or changes the session's
//! subscriptions. A wake-up only makes the waiter read again, and every wait is bounded by its
//! own deadline, so a write path that forgets to wake delays a waiter until then and never loses
//! it. Held in memory only: a call waiting on an instance that goes away fails with it, like any
//! call to it.

use futures::channel::oneshot;
use futures::future::{self, Future, FutureExt};
use std::cell::RefCell;
use std::collections::HashMap;

/// More waiting calls than this on one key and the oldest are woken at once (they read again
/// and come back), so a flood of waits cannot grow the map without bound.
const MAX_PER_RUN: usize = 1_000;

/// The key a stream of MCP session `id` waits under for its tasks and subscriptions (run ids
/// never contain `:`).
pub fn session_key(id: &str) -> String {
    format!("mcp:{id}")
}

#[derive(Default)]
pub struct Waiters(RefCell<HashMap<String, Vec<oneshot::Sender<()>>>>);

impl Waiters {
    /// A wake-up for the next write under `key`.
    fn register(&self, key: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let evicted: Vec<_> = {
            let mut map = self.0.borrow_mut();
            let list = map.entry(key.to_string()).or_default();
            // Waits that ended by their deadline dropped their receivers.
            list.retain(|w| !w.is_canceled());
            let evicted = if list.len() >= MAX_PER_RUN {
                list.drain(..list.len() / 2).collect()
            } else {
                Vec::new()
            };
            list.push(tx);
            evicted
        };
        // Woken once the map is let go, as `wake` does: a wake-up may run its waiter at once.
        for w in evicted {
            let _ = w.send(());
        }
        rx
    }

    /// A wake-up for the next write under any of `keys` (never, for none).
    pub fn register_any<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> impl Future<Output = ()> {
        let woken: Vec<_> = keys.into_iter().map(|key| self.register(key)).collect();
        async move {
            if woken.is_empty() {
                future::pending::<()>().await;
            } else {
                future::select_all(woken).map(|_| ()).await;
            }
        }
    }

    /// Wakes every call waiting under `key`.
    pub fn wake(&self, key: &str) {
        let woken = self.0.borrow_mut().remove(key);
        for w in woken.into_iter().flatten() {
            let _ = w.send(());
        }
    }

    /// Forgets the wake-ups of waits that ended by their deadline under keys nobody wrote since
    /// (a run that ended, say), so they do not stay in memory for the instance's life.
    pub fn prune(&self) {
        self.0.borrow_mut().retain(|_, list| {
            list.retain(|w| !w.is_canceled());
            !list.is_empty()
        });
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

    thread_local! {
        static WATCHED: std::rc::Rc<Waiters> = std::rc::Rc::default();
        static FREE_AT_WAKE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }

    /// A waker that notes whether `WATCHED`'s map could be borrowed when it was woken.
    struct Noting;

    impl std::task::Wake for Noting {
        fn wake(self: std::sync::Arc<Self>) {
            let free = WATCHED.with(|w| w.0.try_borrow_mut().is_ok());
            FREE_AT_WAKE.with(|f| f.set(Some(free)));
        }
    }

    #[test]
    fn a_wait_woken_to_make_room_is_woken_with_the_map_let_go() {
        let waiters = WATCHED.with(std::rc::Rc::clone);
        let mut oldest = waiters.register("run_a");
        let waker = std::task::Waker::from(std::sync::Arc::new(Noting));
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut oldest).poll(&mut cx).is_pending());
        let _flood: Vec<_> = (0..MAX_PER_RUN)
            .map(|_| waiters.register("run_a"))
            .collect();
        assert_eq!(
            FREE_AT_WAKE.with(|f| f.get()),
            Some(true),
            "woken, and its waker could use the waiters (an executor may poll on wake-up)"
        );
    }

    #[test]
    fn a_wait_on_several_keys_ends_at_a_write_of_any() {
        let waiters = Waiters::default();
        let session = session_key("mcp_a");
        let mut any = Box::pin(waiters.register_any(["run_a", session.as_str()]));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(any.as_mut().poll(&mut cx).is_pending());
        waiters.wake("run_b");
        assert!(any.as_mut().poll(&mut cx).is_pending());
        waiters.wake(&session);
        assert!(any.as_mut().poll(&mut cx).is_ready());
        let mut none = Box::pin(waiters.register_any([]));
        assert!(
            none.as_mut().poll(&mut cx).is_pending(),
            "no key: only the deadline ends it"
        );
    }

    #[test]
    fn pruning_forgets_ended_waits_and_keeps_live_ones() {
        let waiters = Waiters::default();
        drop(waiters.register("run_done"));
        let mut live = waiters.register("run_live");
        waiters.prune();
        assert!(!waiters.0.borrow().contains_key("run_done"));
        waiters.wake("run_live");
        assert!(woken(&mut live));
    }
}
