//! What the ledger's alarm looks for: stalled runs, runs whose hand-off never succeeded,
//! and when the next of them is due.

use super::*;

/// Active runs whose last progress is at or before `cutoff`.
pub fn stalled_runs(sql: &SqlStorage, cutoff: i64) -> Result<Vec<RunRecord>> {
    let clause =
        format!("WHERE status IN {ACTIVE} AND updated_at <= ? ORDER BY updated_at LIMIT 100");
    Ok(runs_where(sql, &clause, vec![cutoff.into()])?
        .into_iter()
        .map(|(_, r)| r)
        .collect())
}

/// Queued runs created at or before `cutoff` whose hand-off to their session never succeeded.
pub fn undispatched_runs(sql: &SqlStorage, cutoff: i64) -> Result<Vec<(String, String)>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        session_id: String,
    }
    Ok(sql
        .exec(
            "SELECT id, session_id FROM runs WHERE status = 'queued' AND dispatched_at IS NULL \
             AND created_at <= ? ORDER BY seq LIMIT 100",
            vec![cutoff.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .map(|r| (r.id, r.session_id))
        .collect())
}

/// The earliest time something needs the ledger's attention: the oldest active run's last
/// update (plus the stall timeout), the oldest undispatched run (plus the grace period) and
/// the next callback attempt.
pub fn next_deadline(
    sql: &SqlStorage,
    stall_ms: i64,
    dispatch_grace_ms: i64,
) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Row {
        at: Option<i64>,
    }
    let query = format!(
        "SELECT MIN(at) AS at FROM ( \
           SELECT MIN(updated_at) + ? AS at FROM runs WHERE status IN {ACTIVE} \
           UNION ALL \
           SELECT MIN(created_at) + ? AS at FROM runs WHERE status = 'queued' AND dispatched_at IS NULL \
           UNION ALL \
           SELECT MIN(next_at) AS at FROM callbacks WHERE next_at IS NOT NULL)"
    );
    let row = sql
        .exec(&query, vec![stall_ms.into(), dispatch_grace_ms.into()])?
        .to_array::<Row>()?
        .pop();
    Ok(row.and_then(|r| r.at))
}
