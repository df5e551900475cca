//! A sandbox's table of background processes (its part of the sandbox's state): ids, what each
//! runs, its process group, and the signals that end them.

use crate::error::{ApiError, Result};
use crate::group::signal;
use handoff_wire::ProcessInfo;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// At most this many processes are remembered per sandbox (finished ones are forgotten first).
pub const MAX_TRACKED: usize = 64;

/// How many keys of processes the table no longer remembers are still answered (with the
/// process as it ended), so a start sent again long after is not a second start.
pub const FORGOTTEN_KEYS: usize = 256;

/// A sandbox's background processes: the ones running and the last finished ones.
pub struct Table {
    pub(crate) logs: PathBuf,
    pub(crate) next: AtomicU64,
    entries: Mutex<BTreeMap<u64, Arc<Mutex<Entry>>>>,
    /// Held by a keyed start from its look for the key until its entry is in the table.
    pub(crate) keyed_start: tokio::sync::Mutex<()>,
    /// Keyed processes pruned from `entries`, oldest first, as they ended.
    forgotten: Mutex<VecDeque<(String, ProcessInfo)>>,
}

pub(crate) struct Entry {
    pub(crate) info: ProcessInfo,
    /// The key it was started with (`StartProcess::key`).
    pub(crate) key: Option<String>,
    pub(crate) pgid: Option<i32>,
    /// While frozen: the members' `oom_score_adj` before (see [`super::oom`]).
    pub(crate) oom_saved: super::oom::Saved,
}

impl Table {
    pub fn new(logs: PathBuf) -> Table {
        Table {
            logs,
            next: AtomicU64::new(1),
            entries: Mutex::new(BTreeMap::new()),
            keyed_start: tokio::sync::Mutex::new(()),
            forgotten: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Mutex<Entry>>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn running_count(&self) -> usize {
        self.lock()
            .values()
            .filter(|e| e.lock().map(|e| e.info.running).unwrap_or(false))
            .count()
    }

    pub fn list(&self) -> Vec<ProcessInfo> {
        self.lock()
            .values()
            .filter_map(|e| e.lock().ok().map(|e| e.info.clone()))
            .collect()
    }

    /// The process started with `key`: from the table, or as it ended once pruned from it (the
    /// last [`FORGOTTEN_KEYS`] such keys).
    pub(crate) fn keyed(&self, key: &str) -> Option<ProcessInfo> {
        let known = self.lock().values().find_map(|e| {
            let e = e.lock().ok()?;
            (e.key.as_deref() == Some(key)).then(|| e.info.clone())
        });
        known.or_else(|| {
            let forgotten = self.forgotten.lock().unwrap_or_else(|p| p.into_inner());
            forgotten
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, info)| info.clone())
        })
    }

    pub(crate) fn get(&self, id: u64) -> Result<Arc<Mutex<Entry>>> {
        self.lock().get(&id).cloned().ok_or_else(|| {
            ApiError::not_found(format!(
                "process {id} is not known in this sandbox; list the processes"
            ))
        })
    }

    pub(crate) fn log_paths(&self, id: u64) -> (PathBuf, PathBuf) {
        (
            self.logs.join(format!("{id}.out")),
            self.logs.join(format!("{id}.err")),
        )
    }

    /// Kills every process group this table started.
    pub async fn kill_all(&self) {
        let groups: Vec<i32> = self
            .lock()
            .values()
            .filter_map(|e| e.lock().ok().and_then(|e| e.pgid))
            .collect();
        for pgid in groups {
            signal(pgid, libc::SIGKILL);
        }
        // Reaping happens on each process's own task; wait for it so callers (stop, pause)
        // report the processes as gone rather than racing them.
        for _ in 0..100 {
            if self.running_count() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Forgets the oldest finished processes beyond `MAX_TRACKED`.
    pub(crate) fn prune(&self) {
        let mut entries = self.lock();
        while entries.len() >= MAX_TRACKED {
            let finished = entries
                .iter()
                .find(|(_, e)| e.lock().map(|e| !e.info.running).unwrap_or(true))
                .map(|(id, _)| *id);
            match finished {
                Some(id) => {
                    if let Some(entry) = entries.remove(&id) {
                        self.remember_key(&entry);
                    }
                    let (out, err) = self.log_paths(id);
                    let _ = std::fs::remove_file(out);
                    let _ = std::fs::remove_file(err);
                }
                None => break,
            }
        }
    }

    /// Keeps a pruned entry's key answerable (see [`Table::keyed`]).
    fn remember_key(&self, entry: &Mutex<Entry>) {
        let Ok(entry) = entry.lock() else { return };
        let Some(key) = entry.key.clone() else { return };
        let mut forgotten = self.forgotten.lock().unwrap_or_else(|p| p.into_inner());
        if forgotten.len() >= FORGOTTEN_KEYS {
            forgotten.pop_front();
        }
        forgotten.push_back((key, entry.info.clone()));
    }
}
