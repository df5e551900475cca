//! The one-row SQLite record a sandbox object keeps about its sandbox.

use crate::error::{Error, Result};
use crate::sandboxes::{SandboxRecord, Status};
use serde::Deserialize;
use worker::SqlStorage;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sandbox (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  spec TEXT NOT NULL,
  idle_timeout_s INTEGER NOT NULL,
  metadata TEXT NOT NULL,
  last_active_at INTEGER NOT NULL,
  daemon_created_at INTEGER,
  snapshot_key TEXT,
  snapshot_bytes INTEGER,
  snapshot_at INTEGER
);
";

#[derive(Deserialize)]
struct Row {
    id: String,
    name: String,
    created_by: String,
    created_at: i64,
    status: String,
    spec: String,
    idle_timeout_s: i64,
    metadata: String,
    last_active_at: i64,
    daemon_created_at: Option<i64>,
    snapshot_key: Option<String>,
    snapshot_bytes: Option<i64>,
    snapshot_at: Option<i64>,
    expires_at: Option<i64>,
}

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    // Added later: objects made before have the table without it.
    let has_expiry = sql
        .exec(
            "SELECT name FROM pragma_table_info('sandbox') WHERE name = 'expires_at'",
            None,
        )?
        .to_array::<serde_json::Value>()?
        .len()
        == 1;
    if !has_expiry {
        sql.exec("ALTER TABLE sandbox ADD COLUMN expires_at INTEGER", None)?;
    }
    Ok(())
}

pub fn load(sql: &SqlStorage) -> Result<Option<SandboxRecord>> {
    let Some(row) = sql
        .exec("SELECT * FROM sandbox LIMIT 1", None)?
        .to_array::<Row>()?
        .pop()
    else {
        return Ok(None);
    };
    let decode = |what: &str, e: serde_json::Error| Error::internal(format!("sandbox {what}: {e}"));
    Ok(Some(SandboxRecord {
        id: row.id,
        name: row.name,
        created_by: row.created_by,
        created_at: row.created_at,
        // An unknown status can only come from a newer version; treat it as running.
        status: row.status.parse().unwrap_or(Status::Running),
        spec: serde_json::from_str(&row.spec).map_err(|e| decode("spec", e))?,
        idle_timeout_s: row.idle_timeout_s,
        metadata: serde_json::from_str(&row.metadata).map_err(|e| decode("metadata", e))?,
        last_active_at: row.last_active_at,
        daemon_created_at: row.daemon_created_at,
        snapshot_key: row.snapshot_key,
        snapshot_bytes: row.snapshot_bytes,
        snapshot_at: row.snapshot_at,
        expires_at: row.expires_at,
    }))
}

pub fn save(sql: &SqlStorage, r: &SandboxRecord) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO sandbox (id, name, created_by, created_at, status, spec, idle_timeout_s, \
         metadata, last_active_at, daemon_created_at, snapshot_key, snapshot_bytes, snapshot_at, \
         expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            r.id.as_str().into(),
            r.name.as_str().into(),
            r.created_by.as_str().into(),
            r.created_at.into(),
            r.status.as_str().into(),
            serde_json::to_string(&r.spec)?.into(),
            r.idle_timeout_s.into(),
            serde_json::to_string(&r.metadata)?.into(),
            r.last_active_at.into(),
            r.daemon_created_at.into(),
            r.snapshot_key.clone().into(),
            r.snapshot_bytes.into(),
            r.snapshot_at.into(),
            r.expires_at.into(),
        ],
    )?;
    Ok(())
}
