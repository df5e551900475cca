//! MCP sessions: who opened each, when it was last seen, and their expiry.

use super::*;

pub fn open_mcp_session(
    sql: &SqlStorage,
    id: &str,
    principal: &str,
    protocol_version: &str,
    client: Option<&str>,
    now: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO mcp_sessions (id, principal, protocol_version, client, created_at, last_seen_at) \
         VALUES (?, ?, ?, ?, ?, ?)",
        vec![
            id.into(),
            principal.into(),
            protocol_version.into(),
            client.map(str::to_string).into(),
            now.into(),
            now.into(),
        ],
    )?;
    Ok(())
}

/// A live MCP session's owner and when it was last seen.
pub struct McpSessionRow {
    pub principal: String,
    pub last_seen_at: i64,
    pub ended: bool,
}

pub fn get_mcp_session(sql: &SqlStorage, id: &str) -> Result<Option<McpSessionRow>> {
    #[derive(Deserialize)]
    struct Row {
        principal: String,
        last_seen_at: i64,
        ended_at: Option<i64>,
    }
    Ok(sql
        .exec(
            "SELECT principal, last_seen_at, ended_at FROM mcp_sessions WHERE id = ?",
            vec![id.into()],
        )?
        .to_array::<Row>()?
        .pop()
        .map(|r| McpSessionRow {
            principal: r.principal,
            last_seen_at: r.last_seen_at,
            ended: r.ended_at.is_some(),
        }))
}

pub fn touch_mcp_session(sql: &SqlStorage, id: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE mcp_sessions SET last_seen_at = ? WHERE id = ?",
        vec![now.into(), id.into()],
    )?;
    Ok(())
}

pub fn end_mcp_session(sql: &SqlStorage, id: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE mcp_sessions SET ended_at = ? WHERE id = ?",
        vec![now.into(), id.into()],
    )?;
    Ok(())
}

/// Forgets sessions idle since `idle_cutoff` or ended before `ended_cutoff`.
pub fn purge_mcp_sessions(sql: &SqlStorage, idle_cutoff: i64, ended_cutoff: i64) -> Result<()> {
    sql.exec(
        "DELETE FROM mcp_sessions WHERE last_seen_at < ? OR ended_at < ?",
        vec![idle_cutoff.into(), ended_cutoff.into()],
    )?;
    Ok(())
}
