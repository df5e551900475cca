//! The OAuth store's SQLite schema and every query it runs. Secrets (codes, tokens, client
//! secrets) are stored only as SHA-256 hashes. All functions are synchronous, so a sequence of
//! them without an `await` between is atomic within the Durable Object.

pub mod rate;

use crate::authstore::api::{AccessGrant, AuthRequest, ClientKind, ClientRecord, PendingRequest};
use crate::error::{Error, Result};
use serde::Deserialize;
use worker::SqlStorage;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS clients (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
  id TEXT PRIMARY KEY,
  body TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS codes (
  hash TEXT PRIMARY KEY,
  body TEXT NOT NULL,
  owner TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER,
  grant_id TEXT
);
CREATE TABLE IF NOT EXISTS grants (
  id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  client_name TEXT NOT NULL,
  owner TEXT NOT NULL,
  resource TEXT NOT NULL,
  scope TEXT NOT NULL,
  refresh INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER,
  revoked_reason TEXT
);
CREATE INDEX IF NOT EXISTS grants_by_client ON grants(client_id);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  grant_id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER,
  revoked_at INTEGER
);
CREATE INDEX IF NOT EXISTS tokens_by_grant ON tokens(grant_id);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens(expires_at);
CREATE TABLE IF NOT EXISTS rate (
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  window_start INTEGER NOT NULL,
  window_ms INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (bucket, key)
);
";

pub const ACCESS: &str = "access";
pub const REFRESH: &str = "refresh";

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    Ok(())
}

/// SHA-256 of a secret, hex: how codes, tokens and client secrets are stored.
pub fn hash(secret: &str) -> String {
    crate::mac::sha256_hex(secret.as_bytes())
}

#[derive(Deserialize)]
struct Body {
    body: String,
}

fn bodies(sql: &SqlStorage, query: &str, id: &str) -> Result<Option<String>> {
    Ok(sql
        .exec(query, vec![id.into()])?
        .to_array::<Body>()?
        .into_iter()
        .next()
        .map(|b| b.body))
}

fn kind_name(kind: ClientKind) -> &'static str {
    match kind {
        ClientKind::Registered => "registered",
        ClientKind::Document => "document",
    }
}

/// Client metadata documents kept at most; beyond it the least recently used are dropped
/// (they are a cache: a dropped one is fetched again when its client returns).
pub const MAX_CACHED_DOCUMENTS: i64 = 500;

pub fn put_client(sql: &SqlStorage, client: &ClientRecord, now: i64) -> Result<()> {
    sql.exec(
        "INSERT INTO clients (id, kind, body, created_at, last_used_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET body = excluded.body, last_used_at = excluded.last_used_at",
        vec![
            client.id.clone().into(),
            kind_name(client.kind).into(),
            serde_json::to_string(client)?.into(),
            client.created_at.into(),
            now.into(),
        ],
    )?;
    if client.kind == ClientKind::Document {
        sql.exec(
            "DELETE FROM clients WHERE id IN (SELECT id FROM clients WHERE kind = 'document'
             ORDER BY last_used_at DESC LIMIT -1 OFFSET ?)",
            vec![MAX_CACHED_DOCUMENTS.into()],
        )?;
    }
    Ok(())
}

pub fn get_client(sql: &SqlStorage, id: &str) -> Result<Option<ClientRecord>> {
    bodies(sql, "SELECT body FROM clients WHERE id = ?", id)?
        .map(|body| serde_json::from_str(&body).map_err(Error::from))
        .transpose()
}

pub fn touch_client(sql: &SqlStorage, id: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE clients SET last_used_at = ? WHERE id = ?",
        vec![now.into(), id.into()],
    )?;
    Ok(())
}

#[derive(Deserialize)]
struct Count {
    n: i64,
}

pub fn count_clients(sql: &SqlStorage, kind: ClientKind) -> Result<i64> {
    Ok(sql
        .exec(
            "SELECT COUNT(*) AS n FROM clients WHERE kind = ?",
            vec![kind_name(kind).into()],
        )?
        .to_array::<Count>()?
        .first()
        .map_or(0, |c| c.n))
}

pub fn insert_request(
    sql: &SqlStorage,
    id: &str,
    request: &AuthRequest,
    expires_at: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO requests (id, body, expires_at) VALUES (?, ?, ?)",
        vec![
            id.into(),
            serde_json::to_string(request)?.into(),
            expires_at.into(),
        ],
    )?;
    Ok(())
}

pub fn get_request(sql: &SqlStorage, id: &str, now: i64) -> Result<Option<PendingRequest>> {
    #[derive(Deserialize)]
    struct Row {
        body: String,
        expires_at: i64,
    }
    let row = sql
        .exec(
            "SELECT body, expires_at FROM requests WHERE id = ? AND expires_at > ?",
            vec![id.into(), now.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next();
    row.map(|row| {
        Ok(PendingRequest {
            id: id.to_string(),
            request: serde_json::from_str(&row.body)?,
            expires_at: row.expires_at,
        })
    })
    .transpose()
}

pub fn delete_request(sql: &SqlStorage, id: &str) -> Result<()> {
    sql.exec("DELETE FROM requests WHERE id = ?", vec![id.into()])?;
    Ok(())
}

pub struct CodeRow {
    pub request: AuthRequest,
    pub owner: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub grant_id: Option<String>,
}

pub fn insert_code(
    sql: &SqlStorage,
    code_hash: &str,
    request: &AuthRequest,
    owner: &str,
    expires_at: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO codes (hash, body, owner, expires_at) VALUES (?, ?, ?, ?)",
        vec![
            code_hash.into(),
            serde_json::to_string(request)?.into(),
            owner.into(),
            expires_at.into(),
        ],
    )?;
    Ok(())
}

pub fn get_code(sql: &SqlStorage, code_hash: &str) -> Result<Option<CodeRow>> {
    #[derive(Deserialize)]
    struct Row {
        body: String,
        owner: String,
        expires_at: i64,
        used_at: Option<i64>,
        grant_id: Option<String>,
    }
    let row = sql
        .exec(
            "SELECT body, owner, expires_at, used_at, grant_id FROM codes WHERE hash = ?",
            vec![code_hash.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next();
    row.map(|row| {
        Ok(CodeRow {
            request: serde_json::from_str(&row.body)?,
            owner: row.owner,
            expires_at: row.expires_at,
            used_at: row.used_at,
            grant_id: row.grant_id,
        })
    })
    .transpose()
}

pub fn mark_code_used(
    sql: &SqlStorage,
    code_hash: &str,
    grant_id: Option<&str>,
    now: i64,
) -> Result<()> {
    sql.exec(
        "UPDATE codes SET used_at = ?, grant_id = ? WHERE hash = ?",
        vec![
            now.into(),
            grant_id.map(str::to_string).into(),
            code_hash.into(),
        ],
    )?;
    Ok(())
}

pub struct GrantRow {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    pub owner: String,
    pub resource: String,
    pub scope: String,
    pub refresh: bool,
    pub revoked: bool,
}

pub fn insert_grant(sql: &SqlStorage, grant: &GrantRow, now: i64) -> Result<()> {
    sql.exec(
        "INSERT INTO grants (id, client_id, client_name, owner, resource, scope, refresh, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            grant.id.clone().into(),
            grant.client_id.clone().into(),
            grant.client_name.clone().into(),
            grant.owner.clone().into(),
            grant.resource.clone().into(),
            grant.scope.clone().into(),
            i64::from(grant.refresh).into(),
            now.into(),
        ],
    )?;
    Ok(())
}

pub fn get_grant(sql: &SqlStorage, id: &str) -> Result<Option<GrantRow>> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        client_id: String,
        client_name: String,
        owner: String,
        resource: String,
        scope: String,
        refresh: i64,
        revoked_at: Option<i64>,
    }
    Ok(sql
        .exec(
            "SELECT id, client_id, client_name, owner, resource, scope, refresh, revoked_at
             FROM grants WHERE id = ?",
            vec![id.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next()
        .map(|r| GrantRow {
            id: r.id,
            client_id: r.client_id,
            client_name: r.client_name,
            owner: r.owner,
            resource: r.resource,
            scope: r.scope,
            refresh: r.refresh != 0,
            revoked: r.revoked_at.is_some(),
        }))
}

/// Revokes a grant and with it every token it issued.
pub fn revoke_grant(sql: &SqlStorage, id: &str, reason: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE grants SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND revoked_at IS NULL",
        vec![now.into(), reason.into(), id.into()],
    )?;
    sql.exec(
        "UPDATE tokens SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL",
        vec![now.into(), id.into()],
    )?;
    Ok(())
}

pub struct TokenRow {
    pub kind: String,
    pub grant_id: String,
    pub expires_at: i64,
    pub used: bool,
    pub revoked: bool,
}

pub fn insert_token(
    sql: &SqlStorage,
    token_hash: &str,
    kind: &str,
    grant_id: &str,
    expires_at: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO tokens (hash, kind, grant_id, expires_at) VALUES (?, ?, ?, ?)",
        vec![
            token_hash.into(),
            kind.into(),
            grant_id.into(),
            expires_at.into(),
        ],
    )?;
    Ok(())
}

pub fn get_token(sql: &SqlStorage, token_hash: &str) -> Result<Option<TokenRow>> {
    #[derive(Deserialize)]
    struct Row {
        kind: String,
        grant_id: String,
        expires_at: i64,
        used_at: Option<i64>,
        revoked_at: Option<i64>,
    }
    Ok(sql
        .exec(
            "SELECT kind, grant_id, expires_at, used_at, revoked_at FROM tokens WHERE hash = ?",
            vec![token_hash.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next()
        .map(|r| TokenRow {
            kind: r.kind,
            grant_id: r.grant_id,
            expires_at: r.expires_at,
            used: r.used_at.is_some(),
            revoked: r.revoked_at.is_some(),
        }))
}

pub fn mark_token_used(sql: &SqlStorage, token_hash: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE tokens SET used_at = ? WHERE hash = ?",
        vec![now.into(), token_hash.into()],
    )?;
    Ok(())
}

pub fn revoke_token(sql: &SqlStorage, token_hash: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL",
        vec![now.into(), token_hash.into()],
    )?;
    Ok(())
}

/// The grant behind a live (unexpired, unrevoked) access token.
pub fn live_access(sql: &SqlStorage, token_hash: &str, now: i64) -> Result<Option<AccessGrant>> {
    #[derive(Deserialize)]
    struct Row {
        client_id: String,
        client_name: String,
        owner: String,
        resource: String,
        scope: String,
        expires_at: i64,
    }
    Ok(sql
        .exec(
            "SELECT g.client_id, g.client_name, g.owner, g.resource, g.scope, t.expires_at
             FROM tokens t JOIN grants g ON g.id = t.grant_id
             WHERE t.hash = ? AND t.kind = 'access' AND t.expires_at > ?
               AND t.revoked_at IS NULL AND g.revoked_at IS NULL",
            vec![token_hash.into(), now.into()],
        )?
        .to_array::<Row>()?
        .into_iter()
        .next()
        .map(|r| AccessGrant {
            client_id: r.client_id,
            client_name: r.client_name,
            owner: r.owner,
            resource: r.resource,
            scope: r.scope,
            expires_at: r.expires_at,
        }))
}

/// Forgets what can no longer matter: decided or expired requests and codes, tokens past their
/// expiry (rotated refresh tokens are kept until then for reuse detection), grants with no tokens
/// left, rate windows that ended, and registered clients nobody used for `client_idle_ms`.
pub fn purge(sql: &SqlStorage, now: i64, client_idle_ms: i64) -> Result<()> {
    let day = 24 * 3600 * 1000;
    sql.exec(
        "DELETE FROM requests WHERE expires_at <= ?",
        vec![now.into()],
    )?;
    sql.exec(
        "DELETE FROM codes WHERE expires_at <= ?",
        vec![(now - day).into()],
    )?;
    sql.exec("DELETE FROM tokens WHERE expires_at <= ?", vec![now.into()])?;
    sql.exec(
        "DELETE FROM grants WHERE NOT EXISTS (SELECT 1 FROM tokens WHERE grant_id = grants.id)
           AND created_at <= ?",
        vec![(now - day).into()],
    )?;
    sql.exec(
        "DELETE FROM rate WHERE window_start + window_ms <= ?",
        vec![now.into()],
    )?;
    sql.exec(
        "DELETE FROM clients WHERE last_used_at <= ?
           AND NOT EXISTS (SELECT 1 FROM grants WHERE client_id = clients.id)",
        vec![(now - client_idle_ms).into()],
    )?;
    Ok(())
}
