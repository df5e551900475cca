//! Server-to-client streams: the initialize era's `GET /mcp` (the session's task status and
//! resource updates) and 2026-07-28's `subscriptions/listen` (the tasks and resources the
//! request names). Both wait inside the ledger for a change (`changes` with a wait, woken by the
//! writes they watch) and report it as it happens (resource updates at most every
//! [`MIN_GAP_MS`], task statuses at once); a keep-alive comment goes out after [`QUIET_MS`]
//! without one.
//!
//! Event ids are ledger positions, `<transition seq>.<run update ms>` (a third part tells apart
//! events of one read): a client that reconnects with `Last-Event-ID` gets everything after that
//! position, from durable state, even across restarts. A stream ends after [`LIFETIME`] (the
//! old era's clients reconnect with `Last-Event-ID`; the new era's listen again).

use super::resources;
use super::task_view::{self as tasks_view, Era};
use crate::error::{ErrorKind, Result};
use crate::ledger::api::{ChangeSet, Changes, Cursor, Ledger, TaskRecord, Watched, MAX_AWAIT_MS};
use crate::principal::Principal;
use crate::tools::Ctx;
use futures::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::time::Duration;
use worker::{Delay, Env, Response};

/// After a report of resource updates the stream waits this long before it reads again: a burst
/// of writes to a run (its log lines, say) makes one `resources/updated`, not one per write. A
/// report of task statuses only does not wait (a run moves a few times in its life).
const MIN_GAP_MS: i64 = 500;
/// A comment after this long without a report keeps proxies from closing the stream.
const QUIET_MS: i64 = MAX_AWAIT_MS as i64;
/// How long to wait before reading again after a failed read.
const RETRY: Duration = Duration::from_secs(1);
/// How long one stream lasts.
const LIFETIME: Duration = Duration::from_secs(10 * 60);
/// Reads that may fail in a row before the stream gives up.
const MAX_FAILURES: u32 = 5;
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The most tasks or resources one listen request may name.
const MAX_WATCHED: usize = 100;

/// What a stream reports.
pub enum Watch {
    /// The initialize era: the MCP session's tasks and resource subscriptions.
    Session,
    /// 2026-07-28: what the listen request named; frames carry its id.
    Listed {
        task_ids: Vec<String>,
        watched: Vec<Watched>,
        subscription_id: Value,
    },
}

/// A stream position from a `Last-Event-ID`; `None` for ids this server did not make.
pub fn cursor_of(event_id: &str) -> Option<Cursor> {
    let mut parts = event_id.trim().split('.');
    let seq = parts.next()?.parse().ok()?;
    let updated_ms = parts.next()?.parse().ok()?;
    Some(Cursor { seq, updated_ms })
}

fn event_id(cursor: Cursor, k: usize) -> String {
    if k == 0 {
        format!("{}.{}", cursor.seq, cursor.updated_ms)
    } else {
        format!("{}.{}.{k}", cursor.seq, cursor.updated_ms)
    }
}

/// The filter a `subscriptions/listen` asks for, and what of it this server honours: task ids
/// and run resources; list changes are honoured by never happening within a deploy.
pub fn listen_filter(params: Option<&Map<String, Value>>) -> (Value, Vec<String>, Vec<Watched>) {
    let asked = params
        .and_then(|p| p.get("notifications"))
        .and_then(Value::as_object);
    let strings = |key: &str| -> Vec<String> {
        asked
            .and_then(|a| a.get(key))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let task_ids: Vec<String> = strings("taskIds")
        .into_iter()
        .filter(|id| crate::ids::is_valid(crate::ids::RUN, id))
        .take(MAX_WATCHED)
        .collect();
    let watched: Vec<Watched> = strings("resourceSubscriptions")
        .into_iter()
        .filter_map(|uri| {
            let run_id = resources::parse(&uri)?.run_id()?.to_string();
            Some(Watched { uri, run_id })
        })
        .take(MAX_WATCHED)
        .collect();
    let mut honoured = Map::new();
    for key in ["toolsListChanged", "promptsListChanged"] {
        if asked.and_then(|a| a.get(key)) == Some(&Value::Bool(true)) {
            honoured.insert(key.into(), json!(true));
        }
    }
    if !watched.is_empty() {
        let uris: Vec<&str> = watched.iter().map(|w| w.uri.as_str()).collect();
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    if !task_ids.is_empty() {
        honoured.insert("taskIds".into(), json!(task_ids));
    }
    (Value::Object(honoured), task_ids, watched)
}

struct State {
    env: Env,
    principal: Principal,
    base_url: String,
    ledger: Ledger,
    watch: Watch,
    cursor: Cursor,
    queue: VecDeque<Vec<u8>>,
    /// When the last report of resource updates, and the last bytes of any kind, were queued.
    updates_at: i64,
    sent_at: i64,
    failures: u32,
    started: i64,
    ended: bool,
}

/// Opens a stream from `start` (or from now).
pub async fn open(
    env: &Env,
    principal: Principal,
    base_url: String,
    ledger: Ledger,
    watch: Watch,
    start: Option<Cursor>,
    first: Vec<u8>,
) -> Result<Response> {
    let cursor = match start {
        Some(cursor) => cursor,
        None => {
            let changes = Changes {
                task_ids: None,
                watched: None,
                after: None,
                wait_ms: 0,
            };
            ledger.call(changes).await?.cursor
        }
    };
    let state = State {
        env: env.clone(),
        principal,
        base_url,
        ledger,
        watch,
        cursor,
        queue: VecDeque::from([first]),
        updates_at: 0,
        sent_at: crate::time::now_ms(),
        failures: 0,
        started: crate::time::now_ms(),
        ended: false,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(chunk) = state.queue.pop_front() {
                return Some((chunk, state));
            }
            if state.ended {
                return None;
            }
            let age = crate::time::now_ms() - state.started;
            if age >= LIFETIME.as_millis() as i64 {
                state.ended = true;
                if let Watch::Listed {
                    subscription_id, ..
                } = &state.watch
                {
                    let end = json!({"jsonrpc": "2.0", "id": subscription_id, "result": {
                        "resultType": "complete", "_meta": {SUBSCRIPTION_ID: subscription_id}}});
                    state.queue.push_back(crate::http::sse_event(&end));
                }
                continue;
            }
            state.poll(LIFETIME.as_millis() as i64 - age).await;
        }
    });
    let mut response = Response::from_stream(stream.map(Ok::<Vec<u8>, worker::Error>))?;
    response
        .headers_mut()
        .set("content-type", "text/event-stream")?;
    response.headers_mut().set("cache-control", "no-cache")?;
    Ok(response)
}

impl State {
    /// Waits in the ledger (at most `left` ms, the stream's remaining life) for what changed,
    /// and queues it.
    async fn poll(&mut self, left: i64) {
        let since = crate::time::now_ms() - self.updates_at;
        if since < MIN_GAP_MS {
            Delay::from(Duration::from_millis((MIN_GAP_MS - since) as u64)).await;
        }
        let wait_ms = left.clamp(0, i64::from(MAX_AWAIT_MS)) as u32;
        let after = Some(self.cursor);
        let op = match &self.watch {
            Watch::Session => Changes {
                task_ids: None,
                watched: None,
                after,
                wait_ms,
            },
            Watch::Listed {
                task_ids, watched, ..
            } => Changes {
                task_ids: Some(task_ids.clone()),
                watched: Some(watched.clone()),
                after,
                wait_ms,
            },
        };
        match self.ledger.call(op).await {
            Ok(changes) => {
                self.failures = 0;
                self.report(changes);
            }
            Err(e) if e.kind == ErrorKind::McpSessionGone => self.ended = true,
            Err(e) => {
                worker::console_error!("mcp stream: {}", e.message);
                self.failures += 1;
                self.ended = self.failures >= MAX_FAILURES;
                Delay::from(RETRY).await;
            }
        }
    }

    fn report(&mut self, changes: ChangeSet) {
        let before = self.cursor;
        let now = crate::time::now_ms();
        if changes.is_empty() {
            self.cursor = changes.cursor;
            if now - self.sent_at >= QUIET_MS {
                self.sent_at = now;
                self.queue.push_back(b": keep-alive\n\n".to_vec());
            }
            return;
        }
        self.sent_at = now;
        if !changes.updated.is_empty() {
            self.updates_at = now;
        }
        for (seq, record) in changes.tasks {
            let at = Cursor {
                seq,
                updated_ms: before.updated_ms,
            };
            let message = self.task_notification(record);
            self.queue
                .push_back(crate::http::sse_event_with_id(&event_id(at, 0), &message));
        }
        for (k, uri) in changes.updated.into_iter().enumerate() {
            let mut params = json!({ "uri": uri });
            self.stamp(&mut params);
            let message = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params});
            self.queue.push_back(crate::http::sse_event_with_id(
                &event_id(changes.cursor, k + 1),
                &message,
            ));
        }
        self.cursor = changes.cursor;
    }

    fn task_notification(&self, record: TaskRecord) -> Value {
        match &self.watch {
            Watch::Session => json!({
                "jsonrpc": "2.0",
                "method": "notifications/tasks/status",
                "params": tasks_view::task(&record, Era::Legacy),
            }),
            Watch::Listed { .. } => {
                let ctx = Ctx {
                    env: &self.env,
                    principal: self.principal.clone(),
                    ledger: match Ledger::get(&self.env) {
                        Ok(ledger) => ledger,
                        Err(_) => return json!({}),
                    },
                    base_url: self.base_url.clone(),
                    status: None,
                    task_ttl_ms: None,
                };
                let mut params = Value::Object(tasks_view::detailed(&ctx, record));
                self.stamp(&mut params);
                json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
            }
        }
    }

    /// Adds the listen request's id to a modern frame's `_meta`.
    fn stamp(&self, params: &mut Value) {
        if let Watch::Listed {
            subscription_id, ..
        } = &self.watch
        {
            params["_meta"] = json!({ SUBSCRIPTION_ID: subscription_id });
        }
    }
}

/// The first frame of a listen stream: what it honours.
pub fn acknowledged(honoured: &Value, subscription_id: &Value) -> Vec<u8> {
    crate::http::sse_event(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": honoured, "_meta": {SUBSCRIPTION_ID: subscription_id}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_ledger_positions() {
        let at = Cursor {
            seq: 12,
            updated_ms: 1_700_000_000_000,
        };
        assert_eq!(cursor_of(&event_id(at, 0)), Some(at));
        assert_eq!(cursor_of(&event_id(at, 3)), Some(at));
        assert_eq!(cursor_of("p0123-4"), None);
        assert_eq!(cursor_of(""), None);
        assert_eq!(cursor_of("1"), None);
    }

    #[test]
    fn listen_honours_tasks_and_run_resources_only() {
        let run = "run_0123456789abcdefghjkmnpqrs";
        let params = json!({"notifications": {
            "taskIds": [run, "nope"],
            "resourceSubscriptions": [format!("handoff://runs/{run}"), "file:///etc/passwd"],
            "toolsListChanged": true,
            "resourcesListChanged": true,
        }});
        let (honoured, task_ids, watched) = listen_filter(params.as_object());
        assert_eq!(task_ids, vec![run.to_string()]);
        assert_eq!(watched.len(), 1);
        assert_eq!(honoured["toolsListChanged"], true);
        assert!(honoured.get("resourcesListChanged").is_none());
        assert_eq!(honoured["taskIds"], json!([run]));
    }
}
