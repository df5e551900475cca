//! MCP tasks (a task is a run created by a task-augmented call, kept for its TTL) and what MCP
//! clients watch: the tasks and resource subscriptions a stream reports changes of.

use super::*;

/// A task's row: its id (a run id, or an exec task id), its TTL and creation, and for
/// a command task the command (JSON of `ExecTask`).
#[derive(Deserialize)]
pub struct TaskRow {
    pub run_id: String,
    pub ttl_ms: i64,
    pub created_at: i64,
    pub exec: Option<String>,
}

/// What a task does: its run, or its command.
pub enum Work {
    Run(Box<RunRecord>),
    Exec(String),
}

/// Marks a run as a task (kept from `now` for `ttl_ms`); a second call for the same run (a
/// retried, deduplicated request) keeps the first.
pub fn insert_task(
    sql: &SqlStorage,
    run_id: &str,
    mcp_session: Option<&str>,
    ttl_ms: i64,
    now: i64,
) -> Result<()> {
    insert_task_row(sql, run_id, mcp_session, ttl_ms, now, None)
}

/// Records a command task (and its first transition, so streams see it start).
pub fn insert_exec_task(
    sql: &SqlStorage,
    task_id: &str,
    mcp_session: Option<&str>,
    ttl_ms: i64,
    now: i64,
    exec_json: &str,
) -> Result<()> {
    insert_task_row(sql, task_id, mcp_session, ttl_ms, now, Some(exec_json))?;
    insert_transition(sql, task_id, RunStatus::Running, now)
}

fn insert_task_row(
    sql: &SqlStorage,
    id: &str,
    mcp_session: Option<&str>,
    ttl_ms: i64,
    now: i64,
    exec_json: Option<&str>,
) -> Result<()> {
    sql.exec(
        "INSERT OR IGNORE INTO tasks (run_id, mcp_session, ttl_ms, created_at, exec) \
         VALUES (?, ?, ?, ?, ?)",
        vec![
            id.into(),
            mcp_session.map(str::to_string).into(),
            ttl_ms.into(),
            now.into(),
            exec_json.map(str::to_string).into(),
        ],
    )?;
    Ok(())
}

/// Replaces a command task's JSON, recording the transition to `status`.
pub fn end_exec_task(
    sql: &SqlStorage,
    task_id: &str,
    exec_json: &str,
    status: RunStatus,
    now: i64,
) -> Result<()> {
    sql.exec(
        "UPDATE tasks SET exec = ? WHERE run_id = ?",
        vec![exec_json.into(), task_id.into()],
    )?;
    insert_transition(sql, task_id, status, now)
}

/// The task rows among `ids` that have not expired at `now`.
fn live_tasks(sql: &SqlStorage, ids: &[String], now: i64) -> Result<Vec<TaskRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let mut bindings: Vec<V> = ids.iter().map(|id| id.as_str().into()).collect();
    bindings.push(now.into());
    Ok(sql
        .exec(
            &format!(
                "SELECT run_id, ttl_ms, created_at, exec FROM tasks \
                 WHERE run_id IN ({marks}) AND created_at + ttl_ms > ?"
            ),
            bindings,
        )?
        .to_array::<TaskRow>()?)
}

/// What a task row does (`None` for a run task whose run is gone).
fn work_of(sql: &SqlStorage, row: &TaskRow) -> Result<Option<Work>> {
    Ok(match &row.exec {
        Some(json) => Some(Work::Exec(json.clone())),
        None => get_run(sql, &row.run_id)?.map(|run| Work::Run(Box::new(run))),
    })
}

/// A live task and what it does.
pub fn get_task(sql: &SqlStorage, id: &str, now: i64) -> Result<Option<(TaskRow, Work)>> {
    let Some(task) = live_tasks(sql, &[id.to_string()], now)?.pop() else {
        return Ok(None);
    };
    Ok(work_of(sql, &task)?.map(|work| (task, work)))
}

/// A page of tasks with what they do, and the cursor of the next page.
pub type TaskPage = (Vec<(TaskRow, Work)>, Option<i64>);

/// A page of live tasks, newest first (by row number).
pub fn list_tasks(sql: &SqlStorage, before: Option<i64>, limit: u32, now: i64) -> Result<TaskPage> {
    #[derive(Deserialize)]
    struct Row {
        seq: i64,
        run_id: String,
        ttl_ms: i64,
        created_at: i64,
        exec: Option<String>,
    }
    let rows = sql
        .exec(
            "SELECT rowid AS seq, run_id, ttl_ms, created_at, exec FROM tasks \
             WHERE rowid < ? AND created_at + ttl_ms > ? ORDER BY rowid DESC LIMIT ?",
            vec![
                before.unwrap_or(NO_BOUND).into(),
                now.into(),
                i64::from(limit + 1).into(),
            ],
        )?
        .to_array::<Row>()?;
    let mut paired = Vec::new();
    for r in rows {
        let row = TaskRow {
            run_id: r.run_id,
            ttl_ms: r.ttl_ms,
            created_at: r.created_at,
            exec: r.exec,
        };
        if let Some(work) = work_of(sql, &row)? {
            paired.push((r.seq, (row, work)));
        }
    }
    Ok(paginate(paired, limit))
}

/// Forgets tasks whose TTL ran out (their runs stay).
pub fn purge_tasks(sql: &SqlStorage, now: i64) -> Result<()> {
    sql.exec(
        "DELETE FROM tasks WHERE created_at + ttl_ms <= ?",
        vec![now.into()],
    )?;
    Ok(())
}

/// The newest transition's sequence number (0 before any).
pub fn last_transition_seq(sql: &SqlStorage) -> Result<i64> {
    #[derive(Deserialize)]
    struct Row {
        seq: Option<i64>,
    }
    Ok(sql
        .exec("SELECT MAX(seq) AS seq FROM run_transitions", None)?
        .to_array::<Row>()?
        .pop()
        .and_then(|r| r.seq)
        .unwrap_or(0))
}

/// Tasks (of `session`, or among `task_ids`) with a transition after `after_seq`, each once with
/// the newest such sequence number, oldest first.
pub fn changed_tasks(
    sql: &SqlStorage,
    session: Option<&str>,
    task_ids: &[String],
    after_seq: i64,
) -> Result<Vec<(i64, String)>> {
    #[derive(Deserialize)]
    struct Row {
        seq: i64,
        run_id: String,
    }
    let mut bindings: Vec<V> = vec![after_seq.into()];
    let scope = match session {
        Some(session) => {
            bindings.push(session.into());
            "k.mcp_session = ?".to_string()
        }
        None if task_ids.is_empty() => return Ok(Vec::new()),
        None => {
            bindings.extend(task_ids.iter().map(|id| V::from(id.as_str())));
            format!("k.run_id IN ({})", vec!["?"; task_ids.len()].join(", "))
        }
    };
    let rows = sql
        .exec(
            &format!(
                "SELECT MAX(t.seq) AS seq, t.run_id AS run_id FROM run_transitions t \
                 JOIN tasks k ON k.run_id = t.run_id WHERE t.seq > ? AND {scope} \
                 GROUP BY t.run_id ORDER BY seq LIMIT 100"
            ),
            bindings,
        )?
        .to_array::<Row>()?;
    Ok(rows.into_iter().map(|r| (r.seq, r.run_id)).collect())
}

/// The MCP session task `run_id` belongs to, if it is a task of one.
pub fn task_session(sql: &SqlStorage, run_id: &str) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Row {
        mcp_session: Option<String>,
    }
    let rows = sql
        .exec(
            "SELECT mcp_session FROM tasks WHERE run_id = ?",
            vec![run_id.into()],
        )?
        .to_array::<Row>()?;
    Ok(rows.into_iter().next().and_then(|r| r.mcp_session))
}

/// Records a session's subscription to `uri` (a resource of run `run_id`).
pub fn subscribe(sql: &SqlStorage, session: &str, uri: &str, run_id: &str) -> Result<()> {
    sql.exec(
        "INSERT OR IGNORE INTO mcp_subscriptions (mcp_session, uri, run_id) VALUES (?, ?, ?)",
        vec![session.into(), uri.into(), run_id.into()],
    )?;
    Ok(())
}

pub fn unsubscribe(sql: &SqlStorage, session: &str, uri: &str) -> Result<()> {
    sql.exec(
        "DELETE FROM mcp_subscriptions WHERE mcp_session = ? AND uri = ?",
        vec![session.into(), uri.into()],
    )?;
    Ok(())
}

/// A session's subscriptions as `(uri, run id)`.
pub fn subscriptions(sql: &SqlStorage, session: &str) -> Result<Vec<(String, String)>> {
    #[derive(Deserialize)]
    struct Row {
        uri: String,
        run_id: String,
    }
    let rows = sql
        .exec(
            "SELECT uri, run_id FROM mcp_subscriptions WHERE mcp_session = ? LIMIT 100",
            vec![session.into()],
        )?
        .to_array::<Row>()?;
    Ok(rows.into_iter().map(|r| (r.uri, r.run_id)).collect())
}

/// Forgets the subscriptions of MCP sessions that are gone.
pub fn purge_subscriptions(sql: &SqlStorage) -> Result<()> {
    sql.exec(
        "DELETE FROM mcp_subscriptions WHERE mcp_session NOT IN (SELECT id FROM mcp_sessions)",
        None,
    )?;
    Ok(())
}

/// Which of `run_ids` changed after `after_ms`, with their newest change.
pub fn updated_runs(
    sql: &SqlStorage,
    run_ids: &[String],
    after_ms: i64,
) -> Result<Vec<(String, i64)>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        updated_at: i64,
    }
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; run_ids.len()].join(", ");
    let mut bindings: Vec<V> = run_ids.iter().map(|id| id.as_str().into()).collect();
    bindings.push(after_ms.into());
    let rows = sql
        .exec(
            &format!("SELECT id, updated_at FROM runs WHERE id IN ({marks}) AND updated_at > ?"),
            bindings,
        )?
        .to_array::<Row>()?;
    Ok(rows.into_iter().map(|r| (r.id, r.updated_at)).collect())
}
