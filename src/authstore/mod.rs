//! The OAuth store Durable Object: one per deployment, holding registered and cached clients,
//! pending authorization requests, one-time codes, grants and their tokens (hashed), and the
//! rate-limit counters of the OAuth endpoints, in SQLite. Its alarm forgets what has expired.

mod api;
mod grants;
mod rate;
mod store;

pub use api::{
    AuthMethod, AuthRequest, AuthStore, ClientKind, ClientRecord, Decided, Op, PendingRequest,
    RateHit, TokenReply,
};
pub use grants::{ACCESS_PREFIX, ACCESS_TAG};
pub use store::hash as hash_secret;

use crate::config;
use crate::error::{Error, Result};
use crate::ids;
use crate::rpc;
use crate::time::now_ms;
use api::{Ack, Envelope};
use grants::{Exchange, Lifetimes};
use serde_json::Value;
use std::cell::Cell;
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, State};

/// Authorization requests wait this long for the owner's decision.
const REQUEST_TTL_MS: i64 = 15 * 60 * 1000;
/// The alarm forgets expired entries this often.
const HOUSEKEEPING_MS: i64 = 6 * 3600 * 1000;
/// Registered clients nobody has used (and that hold no grant) are forgotten after this long.
const CLIENT_IDLE_MS: i64 = 30 * 24 * 3600 * 1000;

#[durable_object]
pub struct AuthStoreObject {
    state: State,
    env: Env,
    /// Whether this instance already made sure the housekeeping alarm is set.
    alarm_checked: Cell<bool>,
}

impl DurableObject for AuthStoreObject {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("auth store schema: {e}");
        }
        Self {
            state,
            env,
            alarm_checked: Cell::new(false),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        rpc::serve(req, |envelope: Envelope| self.handle(envelope)).await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(e) = store::purge(&self.state.storage().sql(), now_ms(), CLIENT_IDLE_MS) {
            console_error!("auth store housekeeping: {e}");
        }
        self.state.storage().set_alarm(HOUSEKEEPING_MS).await?;
        Response::ok("")
    }
}

impl AuthStoreObject {
    async fn handle(&self, envelope: Envelope) -> Result<Value> {
        let sql = self.state.storage().sql();
        let now = now_ms();
        for hit in &envelope.limits {
            rate::rate_hit(&sql, hit, now)?;
        }
        let lifetimes = Lifetimes {
            access_secs: config::access_token_ttl_secs(&self.env),
            refresh_secs: config::refresh_token_ttl_secs(&self.env),
            access_tag_key: config::signing_key(&self.env),
        };
        let writes = !matches!(
            envelope.op,
            Op::GetClient { .. } | Op::GetRequest { .. } | Op::VerifyAccess { .. }
        );
        let value = match envelope.op {
            Op::RegisterClient {
                client,
                max_clients,
            } => {
                if store::count_clients(&sql, ClientKind::Registered)? >= i64::from(max_clients) {
                    return Err(Error::unavailable(
                        "this deployment holds the most registered clients it keeps; retry later",
                    ));
                }
                store::put_client(&sql, &client, now)?;
                serde_json::to_value(Ack {})?
            }
            Op::PutDocumentClient { client } => {
                store::put_client(&sql, &client, now)?;
                serde_json::to_value(Ack {})?
            }
            Op::GetClient { id } => serde_json::to_value(store::get_client(&sql, &id)?)?,
            Op::OpenRequest { request } => {
                let id = ids::new_id(ids::AUTH_REQUEST);
                let expires_at = now + REQUEST_TTL_MS;
                store::insert_request(&sql, &id, &request, expires_at)?;
                serde_json::to_value(PendingRequest {
                    id,
                    request,
                    expires_at,
                })?
            }
            Op::GetRequest { id } => serde_json::to_value(
                store::get_request(&sql, &id, now)?.ok_or_else(grants::expired_request)?,
            )?,
            Op::Approve { id, owner } => {
                serde_json::to_value(grants::approve(&sql, &id, &owner, now)?)?
            }
            Op::Deny { id } => serde_json::to_value(grants::deny(&sql, &id, now)?)?,
            Op::ExchangeCode {
                code,
                client_id,
                redirect_uri,
                code_verifier,
                resource,
            } => {
                let exchange = Exchange {
                    code: &code,
                    client_id: &client_id,
                    redirect_uri: redirect_uri.as_deref(),
                    code_verifier: &code_verifier,
                    resource: resource.as_deref(),
                };
                serde_json::to_value(grants::exchange_code(&sql, &exchange, &lifetimes, now)?)?
            }
            Op::Refresh {
                refresh_token,
                client_id,
                resource,
            } => serde_json::to_value(grants::refresh(
                &sql,
                &refresh_token,
                &client_id,
                resource.as_deref(),
                &lifetimes,
                now,
            )?)?,
            Op::Revoke { token, client_id } => {
                grants::revoke(&sql, &token, &client_id, now)?;
                serde_json::to_value(Ack {})?
            }
            Op::VerifyAccess { token } => {
                serde_json::to_value(store::live_access(&sql, &store::hash(&token), now)?)?
            }
            Op::Count => serde_json::to_value(Ack {})?,
        };
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
