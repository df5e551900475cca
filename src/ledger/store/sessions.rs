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
