//! The ledger's SQLite schema and every query it runs (runs here; sandboxes, sessions, MCP
//! sessions and the watchdog's queries in the submodules). All functions are
//! synchronous: a Durable Object runs one event at a time and SQL calls do not yield, so a
//! sequence of calls without an `await` between them is atomic.

use crate::error::{Error, Result};
pub(super) use crate::rpc::paginate;
use crate::runs::{
    final_progress, ProgressDetail, RunError, RunErrorCode, RunOutcome, RunRecord, RunSpec,
    RunStatus, SessionRecord, Tokens, Transition,
};
use crate::sandboxes::SandboxSummary;
use crate::sandboxes::Status as SandboxStatus;
use serde::Deserialize;
use worker::{SqlStorage, SqlStorageValue as V};

mod callbacks;
mod json_rows;
mod mcp_sessions;
mod run_row;
mod sandboxes;
mod sessions;
mod tasks;
mod transitions;
mod watchdog;
mod worker_runs;
pub use callbacks::*;
pub use mcp_sessions::*;
use run_row::RunRow;
pub use sandboxes::*;
pub use sessions::*;
pub use tasks::*;
pub use transitions::*;
pub use watchdog::*;
pub use worker_runs::*;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  session_id TEXT NOT NULL,
  created_by TEXT NOT NULL,
  status TEXT NOT NULL,
  task TEXT NOT NULL,
  title TEXT NOT NULL,
  model TEXT,
  repository TEXT,
  branch TEXT,
  idempotency_key TEXT,
  request_hash TEXT,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  completed_at INTEGER,
  updated_at INTEGER NOT NULL,
  dispatched_at INTEGER,
  phase TEXT,
  progress_message TEXT,
  progress_at INTEGER,
  outcome TEXT,
  error_code TEXT,
  error_message TEXT,
  origin TEXT,
  progress_detail TEXT,
  worker TEXT,
  worker_name TEXT,
  approval TEXT,
  live_log TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_idempotency_key
  ON runs(created_by, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_by_session ON runs(session_id, seq);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status, seq);
CREATE INDEX IF NOT EXISTS runs_active_by_update
  ON runs(updated_at) WHERE status IN ('queued', 'starting', 'running');
CREATE TABLE IF NOT EXISTS run_transitions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  status TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS run_transitions_by_run ON run_transitions(run_id, seq);
CREATE TABLE IF NOT EXISTS run_phases (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  phase TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS run_phases_by_run ON run_phases(run_id, seq);
CREATE TABLE IF NOT EXISTS sessions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_run_at INTEGER NOT NULL,
  run_count INTEGER NOT NULL DEFAULT 0,
  last_run_id TEXT
);
CREATE TABLE IF NOT EXISTS spare_sessions (
  principal TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  ready INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sandboxes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS mcp_sessions (
  id TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  protocol_version TEXT NOT NULL,
  client TEXT,
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE TABLE IF NOT EXISTS tasks (
  run_id TEXT PRIMARY KEY,
  mcp_session TEXT,
  ttl_ms INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  exec TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_session ON tasks(mcp_session) WHERE mcp_session IS NOT NULL;
CREATE TABLE IF NOT EXISTS callbacks (
  delivery_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  url TEXT NOT NULL,
  state TEXT NOT NULL,
  attempt_count INTEGER NOT NULL DEFAULT 0,
  attempts TEXT NOT NULL DEFAULT '[]',
  next_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS callbacks_due ON callbacks(next_at) WHERE next_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS mcp_subscriptions (
  mcp_session TEXT NOT NULL,
  uri TEXT NOT NULL,
  run_id TEXT NOT NULL,
  PRIMARY KEY (mcp_session, uri)
);
";

/// Statuses the watchdog and the dispatcher look at.
const ACTIVE: &str = "('queued', 'starting', 'running')";

/// "No upper bound" for sequence numbers: the largest integer JavaScript holds exactly.
pub(super) const NO_BOUND: i64 = (1 << 53) - 1;

const RUN_COLUMNS: &str = "seq, id, session_id, created_by, status, task, title, model, repository, \
    branch, created_at, started_at, completed_at, updated_at, phase, progress_message, progress_at, \
    outcome, error_code, error_message, origin, progress_detail, worker, approval, live_log, \
    budget, metered_tokens, metered_input, metered_output, metered_reasoning, \
    metered_cache_read, metered_cache_write, model_calls, callback_url";

/// Columns added after the first schema; added to older databases at start.
const LATER_COLUMNS: [&str; 16] = [
    "ALTER TABLE runs ADD COLUMN origin TEXT",
    "ALTER TABLE runs ADD COLUMN progress_detail TEXT",
    "ALTER TABLE tasks ADD COLUMN exec TEXT",
    "ALTER TABLE runs ADD COLUMN worker TEXT",
    "ALTER TABLE runs ADD COLUMN worker_name TEXT",
    "ALTER TABLE runs ADD COLUMN approval TEXT",
    "ALTER TABLE runs ADD COLUMN live_log TEXT",
    "ALTER TABLE runs ADD COLUMN budget TEXT",
    "ALTER TABLE runs ADD COLUMN metered_tokens INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN model_calls INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN callback_url TEXT",
    "ALTER TABLE runs ADD COLUMN metered_input INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN metered_output INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN metered_cache_read INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN metered_cache_write INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN metered_reasoning INTEGER NOT NULL DEFAULT 0",
];

/// Indexes over later columns (created once they exist). Coding runs and worker runs are listed
/// apart, each through an index of its own.
const LATER_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS runs_coding ON runs(seq) WHERE worker_name IS NULL;
CREATE INDEX IF NOT EXISTS runs_by_worker ON runs(worker_name, seq) WHERE worker_name IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_of_workers ON runs(seq) WHERE worker_name IS NOT NULL;
";

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    for statement in LATER_COLUMNS {
        // Fails with "duplicate column" when the column is already there.
        let _ = sql.exec(statement, None);
    }
    sql.exec(LATER_INDEXES, None)?;
    Ok(())
}

pub(super) fn runs_where(
    sql: &SqlStorage,
    clause: &str,
    bindings: Vec<V>,
) -> Result<Vec<(i64, RunRecord)>> {
    let object = json_rows::run_object();
    let query = format!("SELECT {object} AS run FROM runs {clause}");
    sql.exec(&query, bindings)?
        .to_array::<json_rows::JsonRun>()?
        .into_iter()
        .map(|row| row.decode()?.into_record())
        .collect()
}

/// One run with its transitions and phases, or `None` — in one query (the hot path of
/// `opencode_get_result`: each query is a round trip between the object's code and SQLite).
pub fn get_run(sql: &SqlStorage, run_id: &str) -> Result<Option<RunRecord>> {
    let query = format!(
        "SELECT {} AS run, \
         (SELECT json_group_array(json_array(status, at)) FROM \
           (SELECT status, at FROM run_transitions WHERE run_id = runs.id ORDER BY seq)) \
           AS transitions_json, \
         (SELECT json_group_array(json_array(phase, at)) FROM \
           (SELECT phase, at FROM run_phases WHERE run_id = runs.id ORDER BY seq)) \
           AS phases_json \
         FROM runs WHERE id = ?",
        json_rows::run_object()
    );
    let Some(row) = sql
        .exec(&query, vec![run_id.into()])?
        .to_array::<json_rows::JsonRun>()?
        .pop()
    else {
        return Ok(None);
    };
    let mut row = row.decode()?;
    let marks = |json: Option<String>| -> Result<Vec<(String, i64)>> {
        serde_json::from_str(json.as_deref().unwrap_or("[]"))
            .map_err(|e| Error::internal(format!("run {run_id}: stored marks: {e}")))
    };
    let transitions = marks(row.transitions_json.take())?;
    let phases = marks(row.phases_json.take())?;
    let (_, mut run) = row.into_record()?;
    run.transitions = transitions
        .into_iter()
        .filter_map(|(status, at)| {
            RunStatus::parse(&status).map(|status| Transition { status, at })
        })
        .collect();
    run.phases = phases
        .into_iter()
        .map(|(phase, at)| crate::runs::PhaseMark { phase, at })
        .collect();
    if let Some(callback) = &mut run.callback {
        callback.delivery = delivery_of(sql, run_id)?;
    }
    Ok(Some(run))
}

/// The session's run in progress, if any (a session works on one run at a time; the newest
/// wins should two ever overlap).
pub fn session_run(sql: &SqlStorage, session_id: &str) -> Result<Option<RunRecord>> {
    let clause =
        "WHERE session_id = ? AND status IN ('starting', 'running') ORDER BY seq DESC LIMIT 1";
    Ok(runs_where(sql, clause, vec![session_id.into()])?
        .pop()
        .map(|(_, run)| run))
}

/// The run an idempotency key already created for this caller, with the hash of its request.
pub fn find_by_idempotency_key(
    sql: &SqlStorage,
    created_by: &str,
    key: &str,
) -> Result<Option<(String, String)>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        request_hash: Option<String>,
    }
    let row = sql
        .exec(
            "SELECT id, request_hash FROM runs WHERE created_by = ? AND idempotency_key = ?",
            vec![created_by.into(), key.into()],
        )?
        .to_array::<Row>()?
        .pop();
    Ok(row.map(|r| (r.id, r.request_hash.unwrap_or_default())))
}

/// Inserts a new queued run and records it on its session.
pub fn insert_run(
    sql: &SqlStorage,
    run_id: &str,
    session_id: &str,
    created_by: &str,
    spec: &RunSpec,
    request_hash: &str,
    now: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO runs (id, session_id, created_by, status, task, title, model, repository, branch, \
         idempotency_key, request_hash, created_at, updated_at, origin, worker, worker_name, \
         budget, callback_url) \
         VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            run_id.into(),
            session_id.into(),
            created_by.into(),
            spec.task.as_str().into(),
            spec.title.as_str().into(),
            spec.model.clone().into(),
            spec.repository.clone().into(),
            spec.branch.clone().into(),
            spec.idempotency_key.clone().into(),
            request_hash.into(),
            now.into(),
            now.into(),
            spec.origin.clone().into(),
            spec.worker
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?
                .into(),
            spec.worker.as_ref().map(|w| w.worker.clone()).into(),
            spec.budget
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?
                .into(),
            spec.callback_url.clone().into(),
        ],
    )?;
    insert_transition(sql, run_id, RunStatus::Queued, now)?;
    mark_phase(sql, run_id, "queued", now)?;
    sql.exec(
        "UPDATE sessions SET last_run_at = ?, run_count = run_count + 1, last_run_id = ? WHERE id = ?",
        vec![now.into(), run_id.into(), session_id.into()],
    )?;
    Ok(())
}

/// A page of coding runs, newest first, optionally filtered; `limit + 1` rows are read to know
/// whether another page follows.
pub fn list_runs(
    sql: &SqlStorage,
    session_id: Option<&str>,
    status: Option<RunStatus>,
    before: Option<i64>,
    limit: u32,
) -> Result<(Vec<RunRecord>, Option<i64>)> {
    let filter = session_id.map(|id| ("session_id = ?", id));
    page_of_runs(sql, "worker_name IS NULL", filter, status, before, limit)
}

/// A page of runs of one kind (`kind`: a condition), newest first, optionally by one more
/// column and by status.
pub(super) fn page_of_runs(
    sql: &SqlStorage,
    kind: &str,
    filter: Option<(&str, &str)>,
    status: Option<RunStatus>,
    before: Option<i64>,
    limit: u32,
) -> Result<(Vec<RunRecord>, Option<i64>)> {
    let mut conditions = vec!["seq < ?", kind];
    let mut bindings: Vec<V> = vec![before.unwrap_or(NO_BOUND).into()];
    if let Some((condition, value)) = filter {
        conditions.push(condition);
        bindings.push(value.into());
    }
    if let Some(status) = status {
        conditions.push("status = ?");
        bindings.push(status.as_str().into());
    }
    bindings.push(i64::from(limit + 1).into());
    let clause = format!(
        "WHERE {} ORDER BY seq DESC LIMIT ?",
        conditions.join(" AND ")
    );
    Ok(paginate(runs_where(sql, &clause, bindings)?, limit))
}
