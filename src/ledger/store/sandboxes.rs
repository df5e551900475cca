//! The ledger's index of sandboxes: one row per sandbox, for `sandbox_list`.

use super::*;

pub fn insert_sandbox(sql: &SqlStorage, s: &SandboxSummary) -> Result<()> {
    sql.exec(
        "INSERT INTO sandboxes (id, name, created_by, created_at, status, updated_at, metadata) \
         VALUES (?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, metadata = excluded.metadata, \
         updated_at = excluded.updated_at",
        vec![
            s.id.as_str().into(),
            s.name.as_str().into(),
            s.created_by.as_str().into(),
            s.created_at.into(),
            s.status.as_str().into(),
            s.updated_at.into(),
            serde_json::to_string(&s.metadata)?.into(),
        ],
    )?;
    Ok(())
}

/// Records a status; deleted sandboxes leave the listing.
pub fn set_sandbox_status(
    sql: &SqlStorage,
    id: &str,
    status: SandboxStatus,
    now: i64,
) -> Result<()> {
    if status == SandboxStatus::Deleted {
        sql.exec("DELETE FROM sandboxes WHERE id = ?", vec![id.into()])?;
    } else {
        sql.exec(
            "UPDATE sandboxes SET status = ?, updated_at = ? WHERE id = ?",
            vec![status.as_str().into(), now.into(), id.into()],
        )?;
    }
    Ok(())
}

pub fn list_sandboxes(
    sql: &SqlStorage,
    before: Option<i64>,
    limit: u32,
) -> Result<(Vec<SandboxSummary>, Option<i64>)> {
    #[derive(Deserialize)]
    struct Row {
        seq: i64,
        id: String,
        name: String,
        created_by: String,
        created_at: i64,
        status: String,
        updated_at: i64,
        metadata: String,
    }
    let rows = sql
        .exec(
            "SELECT seq, id, name, created_by, created_at, status, updated_at, metadata FROM sandboxes \
             WHERE seq < ? ORDER BY seq DESC LIMIT ?",
            vec![before.unwrap_or(NO_BOUND).into(), i64::from(limit + 1).into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .map(|r| {
            let status = serde_json::from_value(serde_json::Value::String(r.status))
                .unwrap_or(SandboxStatus::Running);
            (
                r.seq,
                SandboxSummary {
                    id: r.id,
                    name: r.name,
                    created_by: r.created_by,
                    created_at: r.created_at,
                    status,
                    updated_at: r.updated_at,
                    metadata: serde_json::from_str(&r.metadata).unwrap_or_default(),
                },
            )
        })
        .collect();
    Ok(paginate(rows, limit))
}
