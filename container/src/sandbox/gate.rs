//! A sandbox's gate: shared by its commands and file operations, exclusive for stop, snapshot,
//! restore and delete. A call that found the sandbox before a delete and waited for the gate
//! behind it gets a not-found error when the gate opens, instead of acting on a workspace that
//! is gone (or making a new one, or starting an init for a sandbox nobody has).

use crate::error::{ApiError, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedRwLockReadGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Default)]
pub struct Gate {
    lock: Arc<RwLock<()>>,
    deleted: AtomicBool,
}

impl Gate {
    pub async fn shared(&self) -> Result<RwLockReadGuard<'_, ()>> {
        let guard = self.lock.read().await;
        self.still_open()?;
        Ok(guard)
    }

    /// The gate shared for as long as the guard lives, wherever it goes (a streamed command).
    pub async fn shared_owned(&self) -> Result<OwnedRwLockReadGuard<()>> {
        let guard = self.lock.clone().read_owned().await;
        self.still_open()?;
        Ok(guard)
    }

    pub async fn exclusive(&self) -> Result<RwLockWriteGuard<'_, ()>> {
        let guard = self.lock.write().await;
        self.still_open()?;
        Ok(guard)
    }

    /// The gate exclusive, and closed for good to whoever waits behind: for a delete.
    pub async fn close(&self) -> Result<RwLockWriteGuard<'_, ()>> {
        let guard = self.exclusive().await?;
        self.deleted.store(true, Ordering::SeqCst);
        Ok(guard)
    }

    /// Not-found once a delete has closed the gate.
    pub fn still_open(&self) -> Result<()> {
        if self.deleted.load(Ordering::SeqCst) {
            return Err(ApiError::not_found(
                "the sandbox was deleted while this call waited for it",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waiting_behind_a_delete_is_refused_once_it_gets_in() {
        let gate = Arc::new(Gate::default());
        let held = gate.shared().await.unwrap();
        let deleting = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.close().await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.shared().await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        drop(held);
        deleting.await.unwrap().unwrap();
        let refused = waiting.await.unwrap().unwrap_err();
        assert_eq!(refused.code, handoff_wire::ErrorCode::NotFound);
        assert!(gate.shared_owned().await.is_err());
        assert!(
            gate.exclusive().await.is_err(),
            "a second delete finds it gone"
        );
    }
}
