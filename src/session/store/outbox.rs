//! The artifacts a session keeps while the bucket refuses them (see `session/outbox.rs`): one
//! row in `outbox` each, its text in `outbox_parts` (the tables are created with the session's
//! other tables, `create_schema`).

use crate::artifacts::Artifact;
use crate::error::Result;
use serde::Deserialize;
use worker::SqlStorage;

/// Bytes of an artifact per row of `outbox_parts` (a row holds at most 2 MB).
const PART_BYTES: usize = 512 * 1024;

/// An artifact the bucket refused, kept until it is stored.
#[derive(Debug, Clone, Deserialize)]
pub struct KeptArtifact {
    pub run_id: String,
    pub artifact: String,
    pub attempts: i64,
    pub since: i64,
}

/// Keeps `text` for a later write, first tried at `next_at`.
pub fn keep_artifact(
    sql: &SqlStorage,
    run_id: &str,
    artifact: Artifact,
    text: &str,
    now: i64,
    next_at: i64,
) -> Result<()> {
    drop_artifact(sql, run_id, artifact.as_str())?;
    let mut rest = text;
    let mut part = 0i64;
    while part == 0 || !rest.is_empty() {
        let mut end = rest.len().min(PART_BYTES);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        sql.exec(
            "INSERT INTO outbox_parts (run_id, artifact, part, body) VALUES (?, ?, ?, ?)",
            vec![
                run_id.into(),
                artifact.as_str().into(),
                part.into(),
                rest[..end].into(),
            ],
        )?;
        rest = &rest[end..];
        part += 1;
    }
    sql.exec(
        "INSERT INTO outbox (run_id, artifact, attempts, next_at, since) VALUES (?, ?, 1, ?, ?)",
        vec![
            run_id.into(),
            artifact.as_str().into(),
            next_at.into(),
            now.into(),
        ],
    )?;
    Ok(())
}

/// The kept artifact whose next try is the earliest, if that is due by `now`.
pub fn due_artifact(sql: &SqlStorage, now: i64) -> Result<Option<KeptArtifact>> {
    Ok(sql
        .exec(
            "SELECT run_id, artifact, attempts, since FROM outbox WHERE next_at <= ? \
             ORDER BY next_at LIMIT 1",
            vec![now.into()],
        )?
        .to_array::<KeptArtifact>()?
        .pop())
}

/// When the next kept artifact is due, if any is kept.
pub fn next_artifact_at(sql: &SqlStorage) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Row {
        next_at: Option<i64>,
    }
    Ok(sql
        .exec("SELECT MIN(next_at) AS next_at FROM outbox", None)?
        .to_array::<Row>()?
        .pop()
        .and_then(|r| r.next_at))
}

/// The kept artifact's text.
pub fn artifact_text(sql: &SqlStorage, kept: &KeptArtifact) -> Result<String> {
    #[derive(Deserialize)]
    struct Row {
        body: String,
    }
    let rows = sql
        .exec(
            "SELECT body FROM outbox_parts WHERE run_id = ? AND artifact = ? ORDER BY part",
            vec![kept.run_id.as_str().into(), kept.artifact.as_str().into()],
        )?
        .to_array::<Row>()?;
    Ok(rows.into_iter().map(|r| r.body).collect())
}

/// Records a failed try; the next is due at `next_at`.
pub fn retry_artifact(sql: &SqlStorage, kept: &KeptArtifact, next_at: i64) -> Result<()> {
    sql.exec(
        "UPDATE outbox SET attempts = attempts + 1, next_at = ? WHERE run_id = ? AND artifact = ?",
        vec![
            next_at.into(),
            kept.run_id.as_str().into(),
            kept.artifact.as_str().into(),
        ],
    )?;
    Ok(())
}

/// Forgets a kept artifact (stored, or given up).
pub fn drop_artifact(sql: &SqlStorage, run_id: &str, artifact: &str) -> Result<()> {
    for table in ["outbox", "outbox_parts"] {
        sql.exec(
            &format!("DELETE FROM {table} WHERE run_id = ? AND artifact = ?"),
            vec![run_id.into(), artifact.into()],
        )?;
    }
    Ok(())
}
