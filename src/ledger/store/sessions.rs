//! Work sessions: which exist, and the listing `opencode_list_sessions` reads.

use super::*;

pub fn session_exists(sql: &SqlStorage, session_id: &str) -> Result<bool> {
    let rows = sql
        .exec(
            "SELECT 1 AS one FROM sessions WHERE id = ?",
            vec![session_id.into()],
        )?
        .to_array::<serde_json::Value>()?;
    Ok(!rows.is_empty())
}

pub fn insert_session(
    sql: &SqlStorage,
    session_id: &str,
    created_by: &str,
    now: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO sessions (id, created_by, created_at, last_run_at) VALUES (?, ?, ?, ?)",
        vec![session_id.into(), created_by.into(), now.into(), now.into()],
    )?;
    Ok(())
}

pub fn list_sessions(
    sql: &SqlStorage,
    before: Option<i64>,
    limit: u32,
) -> Result<(Vec<SessionRecord>, Option<i64>)> {
    #[derive(Deserialize)]
    struct Row {
        seq: i64,
        id: String,
        created_at: i64,
        last_run_at: i64,
        run_count: i64,
        last_run_id: Option<String>,
        last_run_status: Option<String>,
        last_run_title: Option<String>,
    }
    let rows = sql
        .exec(
            "SELECT s.seq, s.id, s.created_at, s.last_run_at, s.run_count, s.last_run_id, \
               r.status AS last_run_status, r.title AS last_run_title \
             FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id \
             WHERE s.seq < ? ORDER BY s.seq DESC LIMIT ?",
            vec![
                before.unwrap_or(NO_BOUND).into(),
                i64::from(limit + 1).into(),
            ],
        )?
        .to_array::<Row>()?
        .into_iter()
        .map(|r| {
            (
                r.seq,
                SessionRecord {
                    id: r.id,
                    created_at: r.created_at,
                    last_run_at: r.last_run_at,
                    run_count: r.run_count,
                    last_run_id: r.last_run_id,
                    last_run_status: r.last_run_status.as_deref().and_then(RunStatus::parse),
                    last_run_title: r.last_run_title,
                },
            )
        })
        .collect();
    Ok(paginate(rows, limit))
}

/// The principal's spare session, taken for their new session (and so no longer spare) when it
/// is prepared and was named less than `fresh_ms` ago; an older one is surely gone, so it is
/// forgotten. One still being prepared stays for a later session: a run that took it over
/// would wait for the preparation. (One that went unused only leaves its run to start its
/// sandbox and agent itself.)
pub fn take_spare(
    sql: &SqlStorage,
    principal: &str,
    fresh_ms: i64,
    now: i64,
) -> Result<Option<String>> {
    let Some((id, created_at, ready)) = spare(sql, principal)? else {
        return Ok(None);
    };
    let fresh = now - created_at < fresh_ms;
    if fresh && !ready {
        return Ok(None);
    }
    sql.exec(
        "DELETE FROM spare_sessions WHERE principal = ?",
        vec![principal.into()],
    )?;
    Ok(fresh.then_some(id))
}

/// Marks a spare session prepared.
pub fn spare_ready(sql: &SqlStorage, session_id: &str) -> Result<()> {
    sql.exec(
        "UPDATE spare_sessions SET ready = 1 WHERE session_id = ?",
        vec![session_id.into()],
    )?;
    Ok(())
}

/// Whether the principal has a spare session named less than `fresh_ms` ago.
pub fn has_spare(sql: &SqlStorage, principal: &str, fresh_ms: i64, now: i64) -> Result<bool> {
    Ok(spare(sql, principal)?.is_some_and(|(_, created_at, _)| now - created_at < fresh_ms))
}

/// Records `session_id` as the principal's spare session (replacing an older one).
pub fn put_spare(sql: &SqlStorage, principal: &str, session_id: &str, now: i64) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO spare_sessions (principal, session_id, created_at) VALUES (?, ?, ?)",
        vec![principal.into(), session_id.into(), now.into()],
    )?;
    Ok(())
}

/// Forgets the spare session `session_id` (its sandbox is gone, or was never made), so its
/// principal's next coding run names a new one.
pub fn drop_spare(sql: &SqlStorage, session_id: &str) -> Result<()> {
    sql.exec(
        "DELETE FROM spare_sessions WHERE session_id = ?",
        vec![session_id.into()],
    )?;
    Ok(())
}

fn spare(sql: &SqlStorage, principal: &str) -> Result<Option<(String, i64, bool)>> {
    #[derive(serde::Deserialize)]
    struct Row {
        session_id: String,
        created_at: i64,
        ready: i64,
    }
    let rows = sql
        .exec(
            "SELECT session_id, created_at, ready FROM spare_sessions WHERE principal = ?",
            vec![principal.into()],
        )?
        .to_array::<Row>()?;
    Ok(rows
        .into_iter()
        .next()
        .map(|r| (r.session_id, r.created_at, r.ready != 0)))
}
