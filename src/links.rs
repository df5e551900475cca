//! Signed, expiring links handed to users (the run page). A link carries an HS256 token bound to
//! one run and one purpose; without `HANDOFF_SIGNING_KEY` no links are issued.

use crate::config;
use crate::error::{Error, Result};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use worker::Env;

/// How long a run page link stays valid. Every `opencode_get_result` hands out a fresh one.
pub const RUN_PAGE_TTL_SECS: i64 = 30 * 24 * 3600;
const RUN_PAGE_AUDIENCE: &str = "handoff:run-page";

#[derive(Serialize, Deserialize)]
struct LinkClaims {
    sub: String,
    aud: String,
    exp: i64,
}

/// The run page URL for `run_id` under `base_url`, or `None` when no signing key is configured.
pub fn run_page_url(env: &Env, base_url: &str, run_id: &str, now_ms: i64) -> Option<String> {
    let key = config::signing_key(env)?;
    let claims = LinkClaims {
        sub: run_id.to_string(),
        aud: RUN_PAGE_AUDIENCE.to_string(),
        exp: now_ms / 1000 + RUN_PAGE_TTL_SECS,
    };
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(&key).ok()?,
    )
    .ok()?;
    Some(format!("{base_url}/runs/{run_id}?token={token}"))
}

/// Checks that `token` is a live run-page token for `run_id`.
pub fn verify_run_page_token(env: &Env, run_id: &str, token: &str) -> Result<()> {
    let key = config::signing_key(env).ok_or_else(|| {
        Error::unavailable("run page links are not configured on this deployment")
    })?;
    let key = DecodingKey::from_secret(&key).map_err(|e| Error::internal(e.to_string()))?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[RUN_PAGE_AUDIENCE]);
    validation.leeway = 0;
    let data = jsonwebtoken::decode::<LinkClaims>(token, &key, &validation).map_err(|_| {
        Error::not_found(
            "this link is invalid or has expired; ask for a fresh one with opencode_get_result",
        )
    })?;
    if data.claims.sub != run_id {
        return Err(Error::not_found("this link is not for this run"));
    }
    Ok(())
}
