//! MCP tasks (a task is a run created by a task-augmented call, kept for its TTL) and what MCP
//! clients watch: the tasks and resource subscriptions a stream reports changes of.

use super::*;

/// The task side of a run.
#[derive(Deserialize)]
pub struct TaskRow {
    pub run_id: String,
    pub mcp_session: Option<String>,
    pub ttl_ms: i64,
    pub created_at: i64,
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
    sql.exec(
        "INSERT OR IGNORE INTO tasks (run_id, mcp_session, ttl_ms, created_at) VALUES (?, ?, ?, ?)",
        vec![
            run_id.into(),
            mcp_session.map(str::to_string).into(),
            ttl_ms.into(),
            now.into(),
        ],
    )?;
    Ok(())
}

/// The task rows among `run_ids` that have not expired at `now`.
fn live_tasks(sql: &SqlStorage, run_ids: &[String], now: i64) -> Result<Vec<TaskRow>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; run_ids.len()].join(", ");
    let mut bindings: Vec<V> = run_ids.iter().map(|id| id.as_str().into()).collect();
    bindings.push(now.into());
    Ok(sql
        .exec(
            &format!(
                "SELECT run_id, mcp_session, ttl_ms, created_at FROM tasks \
                 WHERE run_id IN ({marks}) AND created_at + ttl_ms > ?"
            ),
            bindings,
        )?
        .to_array::<TaskRow>()?)
}

/// A live task and its run.
pub fn get_task(sql: &SqlStorage, run_id: &str, now: i64) -> Result<Option<(TaskRow, RunRecord)>> {
    let Some(task) = live_tasks(sql, &[run_id.to_string()], now)?.pop() else {
        return Ok(None);
    };
    Ok(get_run(sql, run_id)?.map(|run| (task, run)))
}

/// A page of tasks with their runs, and the cursor of the next page.
pub type TaskPage = (Vec<(TaskRow, RunRecord)>, Option<i64>);

/// A page of live tasks, newest first (by run sequence number).
pub fn list_tasks(sql: &SqlStorage, before: Option<i64>, limit: u32, now: i64) -> Result<TaskPage> {
    let rows = runs_where(
        sql,
        "WHERE seq < ? AND id IN (SELECT run_id FROM tasks WHERE created_at + ttl_ms > ?) \
         ORDER BY seq DESC LIMIT ?",
        vec![
            before.unwrap_or(NO_BOUND).into(),
            now.into(),
            i64::from(limit + 1).into(),
        ],
    )?;
    let (runs, next) = paginate(rows, limit);
    let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
    let tasks = live_tasks(sql, &ids, now)?;
    let paired = runs
        .into_iter()
        .filter_map(|run| {
            let task = tasks.iter().find(|t| t.run_id == run.id)?;
            Some((
                TaskRow {
                    run_id: task.run_id.clone(),
                    mcp_session: task.mcp_session.clone(),
                    ttl_ms: task.ttl_ms,
                    created_at: task.created_at,
                },
                run,
            ))
        })
        .collect();
    Ok((paired, next))
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
