//! The MCP sessions the ledger found live, kept in memory beside their rows. The ledger is the
//! only writer of `mcp_sessions`, so a session seen live here needs no SQL read on the calls that
//! follow (every tool call carries its session): one query fewer per call. Ending a session
//! drops it here in the same request, so a DELETE is refused from the very next call; an idle
//! one is refused by the same rule as its row (its last-seen time is mirrored) and dropped when
//! next checked or at the housekeeping alarm. A new instance starts empty and reads rows again.

use super::api::McpSessionRef;
use super::{store, MCP_SESSION_IDLE_MS, MCP_SESSION_TOUCH_MS};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::mcp_session_ids;
use std::cell::RefCell;
use std::collections::HashMap;
use worker::{Env, SqlStorage};

/// More live sessions than this and the mirror starts over (from the rows, as after a restart).
const MAX_MIRRORED: usize = 10_000;

#[derive(Default)]
pub struct LiveSessions(RefCell<HashMap<String, Seen>>);

#[derive(Clone)]
struct Seen {
    principal: String,
    /// As the row has it.
    last_seen_at: i64,
}

impl LiveSessions {
    /// Checks the envelope's MCP session: live and the caller's. A signed id
    /// (`mcp_session_ids`) the ledger has no row for yet is recorded now, at its first request,
    /// when it was issued to this caller within its window; returns whether it was.
    pub fn check(
        &self,
        env: &Env,
        sql: &SqlStorage,
        session: &McpSessionRef,
        now: i64,
    ) -> Result<bool> {
        let mirrored = self.0.borrow().get(&session.id).cloned();
        let (mut seen, opened) = match mirrored {
            Some(seen) => (seen, false),
            None => match store::get_mcp_session(sql, &session.id)? {
                Some(row) if row.ended => return Err(session_gone()),
                Some(row) => (
                    Seen {
                        principal: row.principal,
                        last_seen_at: row.last_seen_at,
                    },
                    false,
                ),
                None => {
                    open_signed_session(env, sql, session, now)?;
                    let seen = Seen {
                        principal: session.principal.clone(),
                        last_seen_at: now,
                    };
                    (seen, true)
                }
            },
        };
        if now - seen.last_seen_at >= MCP_SESSION_IDLE_MS {
            self.forget(&session.id);
            return Err(session_gone());
        }
        if seen.principal != session.principal {
            return Err(session_gone());
        }
        if now - seen.last_seen_at > MCP_SESSION_TOUCH_MS {
            store::touch_mcp_session(sql, &session.id, now)?;
            seen.last_seen_at = now;
        }
        let mut map = self.0.borrow_mut();
        if map.len() >= MAX_MIRRORED && !map.contains_key(&session.id) {
            map.clear();
        }
        map.insert(session.id.clone(), seen);
        Ok(opened)
    }

    /// Drops a session that ended (its row says so from now on).
    pub fn forget(&self, id: &str) {
        self.0.borrow_mut().remove(id);
    }

    /// Drops the sessions idle for too long (their rows are purged at the same time).
    pub fn prune(&self, now: i64) {
        self.0
            .borrow_mut()
            .retain(|_, seen| now - seen.last_seen_at < MCP_SESSION_IDLE_MS);
    }
}

/// Records a signed session at its first request (the signing key is read only then, so the
/// calls of a recorded session never cross to JavaScript for it).
fn open_signed_session(
    env: &Env,
    sql: &SqlStorage,
    session: &McpSessionRef,
    now: i64,
) -> Result<()> {
    let key = config::signing_key(env);
    let signed = mcp_session_ids::parse(&session.id)
        .filter(|signed| {
            key.as_deref()
                .is_some_and(|key| signed.is_for(key, &session.principal))
                && signed.may_open_at(now)
        })
        .ok_or_else(session_gone)?;
    store::open_mcp_session(
        sql,
        &session.id,
        &session.principal,
        signed.version,
        None,
        now,
    )
}

fn session_gone() -> Error {
    Error::new(
        ErrorKind::McpSessionGone,
        "MCP session not found, expired or ended: send initialize to start a new one",
    )
}
