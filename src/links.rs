//! Signed, expiring links handed to users: the run page and sandbox previews. A link carries an
//! HS256 token bound to one purpose (audience) and one subject; without
//! `HANDOFF_SIGNING_KEY` no links are issued.

use crate::config;
use crate::error::{Error, Result};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use worker::Env;

/// How long a run page link stays valid. Every `opencode_get_result` hands out a fresh one.
pub const RUN_PAGE_TTL_SECS: i64 = 30 * 24 * 3600;
const RUN_PAGE_AUDIENCE: &str = "handoff:run-page";
const PREVIEW_AUDIENCE: &str = "handoff:preview";

#[derive(Serialize, Deserialize)]
struct LinkClaims {
    sub: String,
    aud: String,
    exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
}

fn sign(env: &Env, claims: &LinkClaims) -> Option<String> {
    let key = config::signing_key(env)?;
    let key = EncodingKey::from_secret(&key).ok()?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).ok()
}

fn verify(env: &Env, token: &str, audience: &str) -> Result<LinkClaims> {
    let key = config::signing_key(env)
        .ok_or_else(|| Error::not_configured("links are not configured on this deployment"))?;
    let key = DecodingKey::from_secret(&key).map_err(|e| Error::internal(e.to_string()))?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[audience]);
    validation.leeway = 0;
    jsonwebtoken::decode::<LinkClaims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|_| Error::not_found("this link is invalid or has expired; ask for a fresh one"))
}

/// The run page URL for `run_id` under `base_url`, or `None` when no signing key is configured.
pub fn run_page_url(env: &Env, base_url: &str, run_id: &str, now_ms: i64) -> Option<String> {
    let claims = LinkClaims {
        sub: run_id.to_string(),
        aud: RUN_PAGE_AUDIENCE.to_string(),
        exp: now_ms / 1000 + RUN_PAGE_TTL_SECS,
        port: None,
    };
    let token = sign(env, &claims)?;
    Some(format!("{base_url}/runs/{run_id}?token={token}"))
}

/// Checks that `token` is a live run-page token for `run_id`.
pub fn verify_run_page_token(env: &Env, run_id: &str, token: &str) -> Result<()> {
    let claims = verify(env, token, RUN_PAGE_AUDIENCE)?;
    if claims.sub != run_id {
        return Err(Error::not_found("this link is not for this run"));
    }
    Ok(())
}

/// A preview URL for `port` of a sandbox, valid until `expires_at` (seconds since the epoch).
pub fn preview_url(
    env: &Env,
    base_url: &str,
    sandbox_id: &str,
    port: u16,
    expires_at: i64,
) -> Result<String> {
    let claims = LinkClaims {
        sub: sandbox_id.to_string(),
        aud: PREVIEW_AUDIENCE.to_string(),
        exp: expires_at,
        port: Some(port),
    };
    let token = sign(env, &claims).ok_or_else(|| {
        Error::not_configured(format!(
            "preview links need {} (at least {} characters) on this deployment",
            config::SIGNING_KEY,
            config::MIN_SIGNING_KEY_LEN
        ))
    })?;
    Ok(format!("{base_url}/preview/{token}/"))
}

/// The sandbox and port a live preview token grants.
pub fn verify_preview_token(env: &Env, token: &str) -> Result<(String, u16)> {
    let claims = verify(env, token, PREVIEW_AUDIENCE)?;
    let port = claims
        .port
        .ok_or_else(|| Error::not_found("this link is not a preview link"))?;
    Ok((claims.sub, port))
}
