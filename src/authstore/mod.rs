//! The OAuth store Durable Object: one per deployment, holding registered and cached clients,
//! pending authorization requests, one-time codes, grants and their tokens (hashed), and the
//! rate-limit counters of the OAuth endpoints, in SQLite. Its alarm forgets what has expired.

pub mod api;
mod grants;
mod handler;
mod store;

use crate::config;
use crate::error::Result;
use crate::rpc;
use crate::time::now_ms;
use api::Envelope;
use grants::Lifetimes;
use rpc::Encoded;
use std::cell::Cell;
use std::rc::Rc;
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, State};

/// Authorization requests wait this long for the owner's decision.
const REQUEST_TTL_MS: i64 = 15 * 60 * 1000;
/// The alarm forgets expired entries this often.
const HOUSEKEEPING_MS: i64 = 6 * 3600 * 1000;
/// Registered clients nobody has used (and that hold no grant) are forgotten after this long.
const CLIENT_IDLE_MS: i64 = 30 * 24 * 3600 * 1000;

/// Cloned for each op it answers over RPC (`rpc::export_rpc!`): every field is shared.
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
#[derive(Clone)]
pub struct AuthStoreObject {
    state: Rc<State>,
    env: Env,
    /// Whether this instance already made sure the housekeeping alarm is set.
    alarm_checked: Rc<Cell<bool>>,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for AuthStoreObject {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("auth store schema: {e}");
        }
        Self {
            state: Rc::new(state),
            env,
            alarm_checked: Rc::default(),
        }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        rpc::fetch_refused()
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(e) = store::purge(&self.state.storage().sql(), now_ms(), CLIENT_IDLE_MS) {
            console_error!("auth store housekeeping: {e}");
        }
        self.state.storage().set_alarm(HOUSEKEEPING_MS).await?;
        Response::ok("")
    }
}

rpc::export_rpc!(AuthStoreObject, |store, text| {
    rpc::serve_text(text, |envelope: Envelope| store.handle(envelope)).await
});

impl AuthStoreObject {
    async fn handle(&self, envelope: Envelope) -> Result<Encoded> {
        let sql = self.state.storage().sql();
        let now = now_ms();
        for hit in &envelope.limits {
            store::rate::rate_hit(&sql, hit, now)?;
        }
        let lifetimes = Lifetimes {
            access_secs: config::access_token_ttl_secs(&self.env),
            refresh_secs: config::refresh_token_ttl_secs(&self.env),
            access_tag_key: config::signing_key(&self.env),
        };
        let writes = !envelope.op.reads_only();
        let value = envelope
            .op
            .dispatch(&handler::Call {
                sql,
                now,
                lifetimes,
            })
            .await?;
        if writes || !envelope.limits.is_empty() {
            self.ensure_alarm().await?;
        }
        Ok(value)
    }

    async fn ensure_alarm(&self) -> Result<()> {
        if self.alarm_checked.get() {
            return Ok(());
        }
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_none() {
            storage.set_alarm(HOUSEKEEPING_MS).await?;
        }
        self.alarm_checked.set(true);
        Ok(())
    }
}
