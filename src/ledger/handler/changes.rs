//! What streams ask the ledger (`changes`): what changed since a stream's cursor, and waiting
//! for the next change under the keys that stream watches (its runs, its tasks, its MCP
//! session), woken by the ops that write them.

use super::{task_record, Call};
use crate::error::Result;
use crate::ledger::api::{ChangeSet, Changes, Cursor, MAX_AWAIT_MS};
use crate::ledger::store;
use crate::ledger::waiters::session_key;
use crate::time::now_ms;

impl Call<'_> {
    /// `changes`: what changed since the op's cursor, waiting up to its `wait_ms` for something
    /// to (woken by the writes it watches).
    pub(super) async fn wait_for_changes(&self, op: Changes) -> Result<ChangeSet> {
        let deadline = self.now + i64::from(op.wait_ms.min(MAX_AWAIT_MS));
        loop {
            let (set, keys) = self.read_changes(&op)?;
            let left = deadline - now_ms();
            if op.after.is_none() || !set.is_empty() || Some(set.cursor) != op.after || left <= 0 {
                return Ok(set);
            }
            self.woken_or_after(keys.iter().map(String::as_str), left)
                .await;
            // The session may have ended meanwhile (its close wakes its key).
            if let Some(session) = &self.mcp_session {
                let (env, sql) = (&self.ledger.env, &self.sql);
                self.ledger
                    .live_sessions
                    .check(env, sql, session, now_ms())?;
            }
        }
    }

    /// Wakes the streams of the envelope's MCP session (a task of it started, its
    /// subscriptions changed).
    pub(super) fn wake_streams(&self) {
        if let Some(session) = &self.mcp_session {
            self.ledger.waiters.wake(&session_key(&session.id));
        }
    }

    /// What changed since `op.after`, and the keys to wait under for the next change: the runs
    /// watched, the tasks named, and the session (for its tasks and subscriptions).
    fn read_changes(&self, op: &Changes) -> Result<(ChangeSet, Vec<String>)> {
        let sql = &self.sql;
        let Some(after) = op.after else {
            let cursor = Cursor {
                seq: store::last_transition_seq(sql)?,
                updated_ms: self.now - 1,
            };
            let set = ChangeSet {
                tasks: Vec::new(),
                updated: Vec::new(),
                cursor,
            };
            return Ok((set, Vec::new()));
        };
        let session = self.mcp_session.as_ref().map(|s| s.id.as_str());
        let mut keys: Vec<String> = session.map(session_key).into_iter().collect();
        let changed = match &op.task_ids {
            Some(ids) => {
                keys.extend(ids.iter().cloned());
                store::changed_tasks(sql, None, ids, after.seq)?
            }
            None => match session {
                Some(session) => store::changed_tasks(sql, Some(session), &[], after.seq)?,
                None => Vec::new(),
            },
        };
        let mut cursor = after;
        let mut tasks = Vec::new();
        for (seq, run_id) in changed {
            cursor.seq = cursor.seq.max(seq);
            if let Some(row) = store::get_task(sql, &run_id, now_ms())? {
                tasks.push((seq, task_record(row)?));
            }
        }
        let watched: Vec<(String, String)> = match &op.watched {
            Some(list) => list
                .iter()
                .map(|w| (w.uri.clone(), w.run_id.clone()))
                .collect(),
            None => match session {
                Some(session) => store::subscriptions(sql, session)?,
                None => Vec::new(),
            },
        };
        let run_ids: Vec<String> = watched.iter().map(|(_, run)| run.clone()).collect();
        let mut updated = Vec::new();
        for (run_id, at) in store::updated_runs(sql, &run_ids, after.updated_ms)? {
            cursor.updated_ms = cursor.updated_ms.max(at);
            updated.extend(
                watched
                    .iter()
                    .filter(|(_, run)| *run == run_id)
                    .map(|(uri, _)| uri.clone()),
            );
        }
        keys.extend(run_ids);
        let set = ChangeSet {
            tasks,
            updated,
            cursor,
        };
        Ok((set, keys))
    }
}
