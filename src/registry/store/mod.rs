//! The registry's SQLite: workers (a row per name, kept as a tombstone after delete so version
//! numbers never repeat), their immutable versions and folders, and sealed secrets. Synchronous
//! like every Durable Object store: calls without an `await` between them are atomic.

pub mod templates;

use crate::error::{Error, Result};
use crate::workers::{FileSet, Manifest, Runtime, VersionRecord, WorkerRecord};
use serde::Deserialize;
use worker::{SqlStorage, SqlStorageValue as V};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS workers (
  name TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  runtime TEXT NOT NULL,
  current_version INTEGER NOT NULL,
  versions INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  deleted_at INTEGER,
  next_fire_at INTEGER,
  last_fired_at INTEGER,
  hook_id TEXT,
  origin TEXT
);
CREATE INDEX IF NOT EXISTS workers_by_fire ON workers(next_fire_at) WHERE next_fire_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS versions (
  worker TEXT NOT NULL,
  version INTEGER NOT NULL,
  manifest TEXT NOT NULL,
  digest TEXT NOT NULL,
  source TEXT NOT NULL,
  files_of INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (worker, version)
);
CREATE TABLE IF NOT EXISTS folders (
  worker TEXT NOT NULL,
  version INTEGER NOT NULL,
  files TEXT NOT NULL,
  PRIMARY KEY (worker, version)
);
CREATE TABLE IF NOT EXISTS secrets (
  scope TEXT NOT NULL,
  name TEXT NOT NULL,
  sealed TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL,
  PRIMARY KEY (scope, name)
);
";

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    Ok(())
}

#[derive(Deserialize)]
struct WorkerRow {
    name: String,
    title: String,
    description: String,
    runtime: String,
    current_version: i64,
    versions: i64,
    created_by: String,
    created_at: i64,
    updated_at: i64,
    next_fire_at: Option<i64>,
    last_fired_at: Option<i64>,
    hook_id: Option<String>,
    origin: Option<String>,
}

/// A live worker, its hook id and the origin it was deployed through.
pub struct Row {
    pub record: WorkerRecord,
    pub hook_id: Option<String>,
    pub next_fire_at: Option<i64>,
    pub origin: Option<String>,
}

impl WorkerRow {
    fn into_row(self) -> Row {
        Row {
            record: WorkerRecord {
                name: self.name,
                title: self.title,
                description: self.description,
                runtime: self.runtime.parse().unwrap_or(Runtime::Sh),
                current_version: self.current_version as u32,
                versions: self.versions as u32,
                created_by: self.created_by,
                created_at: self.created_at,
                updated_at: self.updated_at,
                next_fires: Vec::new(),
                last_fired_at: self.last_fired_at,
                webhook_path: None,
            },
            hook_id: self.hook_id,
            next_fire_at: self.next_fire_at,
            origin: self.origin,
        }
    }
}

const WORKER_COLUMNS: &str = "name, title, description, runtime, current_version, versions, \
    created_by, created_at, updated_at, next_fire_at, last_fired_at, hook_id, origin";

/// A live (not deleted) worker.
pub fn worker(sql: &SqlStorage, name: &str) -> Result<Option<Row>> {
    let query =
        format!("SELECT {WORKER_COLUMNS} FROM workers WHERE name = ? AND deleted_at IS NULL");
    Ok(sql
        .exec(&query, vec![name.into()])?
        .to_array::<WorkerRow>()?
        .pop()
        .map(WorkerRow::into_row))
}

/// Live workers by name after `after`; `limit + 1` are read to know whether more follow.
pub fn list_workers(sql: &SqlStorage, after: Option<&str>, limit: u32) -> Result<Vec<Row>> {
    let query = format!(
        "SELECT {WORKER_COLUMNS} FROM workers WHERE deleted_at IS NULL AND name > ? \
         ORDER BY name LIMIT ?"
    );
    Ok(sql
        .exec(
            &query,
            vec![after.unwrap_or("").into(), i64::from(limit + 1).into()],
        )?
        .to_array::<WorkerRow>()?
        .into_iter()
        .map(WorkerRow::into_row)
        .collect())
}

/// How many versions a name has had (deleted workers included): the next version is one more.
fn version_count(sql: &SqlStorage, name: &str) -> Result<u32> {
    #[derive(Deserialize)]
    struct Count {
        versions: i64,
    }
    Ok(sql
        .exec(
            "SELECT versions FROM workers WHERE name = ?",
            vec![name.into()],
        )?
        .to_array::<Count>()?
        .pop()
        .map_or(0, |c| c.versions as u32))
}

/// What a new version needs stored.
pub struct NewVersion<'a> {
    pub manifest: &'a Manifest,
    pub digest: &'a str,
    pub source: &'a str,
    /// The folder, or `None` when it reuses an older version's (`files_of`).
    pub files: Option<&'a FileSet>,
    pub files_of: Option<u32>,
    pub by: &'a str,
    pub now: i64,
    pub hook_id: Option<String>,
    pub next_fire_at: Option<i64>,
    /// The Worker origin the deploy came through (scheduled runs reach the proxy there).
    pub origin: Option<String>,
}

/// Stores the next version of `manifest.name` and makes it current; returns its number.
pub fn add_version(sql: &SqlStorage, v: &NewVersion<'_>) -> Result<u32> {
    let m = v.manifest;
    let number = version_count(sql, &m.name)? + 1;
    let files_of = v.files_of.unwrap_or(number);
    sql.exec(
        "INSERT INTO versions (worker, version, manifest, digest, source, files_of, created_by, \
         created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            m.name.as_str().into(),
            i64::from(number).into(),
            serde_json::to_string(m)?.into(),
            v.digest.into(),
            v.source.into(),
            i64::from(files_of).into(),
            v.by.into(),
            v.now.into(),
        ],
    )?;
    if let Some(files) = v.files {
        sql.exec(
            "INSERT INTO folders (worker, version, files) VALUES (?, ?, ?)",
            vec![
                m.name.as_str().into(),
                i64::from(number).into(),
                serde_json::to_string(files)?.into(),
            ],
        )?;
    }
    sql.exec(
        "INSERT INTO workers (name, title, description, runtime, current_version, versions, \
           created_by, created_at, updated_at, next_fire_at, hook_id, origin) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?7, ?8, ?9, ?10) \
         ON CONFLICT(name) DO UPDATE SET title = ?2, description = ?3, runtime = ?4, \
           current_version = ?5, versions = ?5, updated_at = ?7, next_fire_at = ?8, hook_id = ?9, \
           origin = COALESCE(?10, origin), \
           created_at = CASE WHEN deleted_at IS NULL THEN created_at ELSE ?7 END, \
           created_by = CASE WHEN deleted_at IS NULL THEN created_by ELSE ?6 END, \
           last_fired_at = CASE WHEN deleted_at IS NULL THEN last_fired_at ELSE NULL END, \
           deleted_at = NULL",
        vec![
            m.name.as_str().into(),
            m.title.as_str().into(),
            m.description.as_str().into(),
            m.runtime.as_str().into(),
            i64::from(number).into(),
            v.by.into(),
            v.now.into(),
            v.next_fire_at.into(),
            v.hook_id.clone().into(),
            v.origin.clone().into(),
        ],
    )?;
    Ok(number)
}

#[derive(Deserialize)]
struct VersionRow {
    worker: String,
    version: i64,
    manifest: String,
    digest: String,
    source: String,
    files_of: i64,
    created_by: String,
    created_at: i64,
}

impl VersionRow {
    fn into_record(self) -> Result<(i64, VersionRecord)> {
        Ok((
            self.version,
            VersionRecord {
                worker: self.worker,
                version: self.version as u32,
                manifest: serde_json::from_str(&self.manifest)?,
                digest: self.digest,
                source: self.source,
                files_of: self.files_of as u32,
                created_by: self.created_by,
                created_at: self.created_at,
                files: None,
            },
        ))
    }
}

const VERSION_COLUMNS: &str =
    "worker, version, manifest, digest, source, files_of, created_by, created_at";

pub fn version(sql: &SqlStorage, name: &str, number: u32) -> Result<Option<VersionRecord>> {
    let query = format!("SELECT {VERSION_COLUMNS} FROM versions WHERE worker = ? AND version = ?");
    match sql
        .exec(&query, vec![name.into(), i64::from(number).into()])?
        .to_array::<VersionRow>()?
        .pop()
    {
        Some(row) => Ok(Some(row.into_record()?.1)),
        None => Ok(None),
    }
}

/// Versions newest first, strictly older than `before`; `limit + 1` rows.
pub fn versions(
    sql: &SqlStorage,
    name: &str,
    before: Option<i64>,
    limit: u32,
) -> Result<Vec<(i64, VersionRecord)>> {
    let query = format!(
        "SELECT {VERSION_COLUMNS} FROM versions WHERE worker = ? AND version < ? \
         ORDER BY version DESC LIMIT ?"
    );
    sql.exec(
        &query,
        vec![
            name.into(),
            before.unwrap_or(i64::MAX).into(),
            i64::from(limit + 1).into(),
        ],
    )?
    .to_array::<VersionRow>()?
    .into_iter()
    .map(VersionRow::into_record)
    .collect()
}

/// The folder stored for `version` of `name`.
pub fn folder(sql: &SqlStorage, name: &str, version: u32) -> Result<FileSet> {
    #[derive(Deserialize)]
    struct Folder {
        files: String,
    }
    let row = sql
        .exec(
            "SELECT files FROM folders WHERE worker = ? AND version = ?",
            vec![name.into(), i64::from(version).into()],
        )?
        .to_array::<Folder>()?
        .pop()
        .ok_or_else(|| Error::not_found(format!("the files of {name} v{version} are gone")))?;
    Ok(serde_json::from_str(&row.files)?)
}

/// Marks a worker deleted and drops its versions, folders and schedule.
pub fn delete_worker(sql: &SqlStorage, name: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE workers SET deleted_at = ?, next_fire_at = NULL, hook_id = NULL WHERE name = ?",
        vec![now.into(), name.into()],
    )?;
    sql.exec("DELETE FROM versions WHERE worker = ?", vec![name.into()])?;
    sql.exec("DELETE FROM folders WHERE worker = ?", vec![name.into()])?;
    sql.exec("DELETE FROM secrets WHERE scope = ?", vec![name.into()])?;
    Ok(())
}

/// Live workers whose schedule is due at or before `now`.
pub fn due(sql: &SqlStorage, now: i64) -> Result<Vec<(String, i64)>> {
    #[derive(Deserialize)]
    struct Due {
        name: String,
        next_fire_at: i64,
    }
    Ok(sql
        .exec(
            "SELECT name, next_fire_at FROM workers WHERE next_fire_at IS NOT NULL \
             AND next_fire_at <= ? AND deleted_at IS NULL ORDER BY next_fire_at LIMIT 50",
            vec![now.into()],
        )?
        .to_array::<Due>()?
        .into_iter()
        .map(|d| (d.name, d.next_fire_at))
        .collect())
}

/// Records a fire: when it happened and the next one.
pub fn fired(sql: &SqlStorage, name: &str, at: i64, next: Option<i64>) -> Result<()> {
    sql.exec(
        "UPDATE workers SET last_fired_at = ?, next_fire_at = ? WHERE name = ?",
        vec![at.into(), next.into(), name.into()],
    )?;
    Ok(())
}

/// The earliest schedule fire time.
pub fn next_fire(sql: &SqlStorage) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Next {
        at: Option<i64>,
    }
    Ok(sql
        .exec(
            "SELECT MIN(next_fire_at) AS at FROM workers WHERE deleted_at IS NULL",
            None,
        )?
        .to_array::<Next>()?
        .pop()
        .and_then(|n| n.at))
}

/// A sealed secret and its metadata.
#[derive(Deserialize)]
pub struct SecretRow {
    pub scope: String,
    pub name: String,
    pub sealed: String,
    pub updated_at: i64,
    pub updated_by: String,
}

pub fn put_secret(sql: &SqlStorage, row: &SecretRow) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO secrets (scope, name, sealed, updated_at, updated_by) \
         VALUES (?, ?, ?, ?, ?)",
        vec![
            row.scope.as_str().into(),
            row.name.as_str().into(),
            row.sealed.as_str().into(),
            row.updated_at.into(),
            row.updated_by.as_str().into(),
        ],
    )?;
    Ok(())
}

/// Deletes a secret; whether there was one.
pub fn delete_secret(sql: &SqlStorage, scope: &str, name: &str) -> Result<bool> {
    let existed = !secrets_where(
        sql,
        "WHERE scope = ? AND name = ?",
        vec![scope.into(), name.into()],
    )?
    .is_empty();
    sql.exec(
        "DELETE FROM secrets WHERE scope = ? AND name = ?",
        vec![scope.into(), name.into()],
    )?;
    Ok(existed)
}

pub fn secrets_where(sql: &SqlStorage, clause: &str, bindings: Vec<V>) -> Result<Vec<SecretRow>> {
    let query = format!(
        "SELECT scope, name, sealed, updated_at, updated_by FROM secrets {clause} ORDER BY name, scope"
    );
    Ok(sql.exec(&query, bindings)?.to_array::<SecretRow>()?)
}

/// Every live worker's current manifest (for secret usage), by name.
pub fn current_manifests(sql: &SqlStorage) -> Result<Vec<Manifest>> {
    #[derive(Deserialize)]
    struct M {
        manifest: String,
    }
    sql.exec(
        "SELECT v.manifest AS manifest FROM workers w JOIN versions v \
         ON v.worker = w.name AND v.version = w.current_version WHERE w.deleted_at IS NULL",
        None,
    )?
    .to_array::<M>()?
    .into_iter()
    .map(|m| Ok(serde_json::from_str(&m.manifest)?))
    .collect()
}

/// What a sealed value is bound to: its scope and name.
pub fn sealed_name(scope: &str, name: &str) -> String {
    format!("{scope}/{name}")
}

/// The scope sandbox secrets are stored under (no worker can have this name).
pub const SANDBOX_SCOPE: &str = "@sandbox";
