//! Signed, expiring links handed to users: the run page (an HS256 token bound to one purpose
//! and one run) and sandbox previews (an origin of their own whose name carries an HMAC);
//! without `HANDOFF_SIGNING_KEY` no links are issued.

use crate::config;
use crate::error::{Error, Result};
use crate::jwt;
use serde::{Deserialize, Serialize};
use worker::Env;

/// How long a run page link stays valid. Every `opencode_get_result` hands out one with at
/// least this long left, less [`REUSE_SECS`].
pub const RUN_PAGE_TTL_SECS: i64 = 30 * 24 * 3600;
/// A page token is reused for this long (per isolate), so a client polling a run gets the same
/// link and the Worker signs it once rather than on every poll.
const REUSE_SECS: i64 = 3600;
/// Tokens kept for reuse, at most (the cache starts over when full).
const REUSE_MAX: usize = 1000;
const RUN_PAGE_AUDIENCE: &str = "handoff:run-page";

#[derive(Serialize, Deserialize)]
struct LinkClaims {
    sub: String,
    aud: String,
    exp: i64,
}

fn sign(env: &Env, claims: &LinkClaims) -> Option<String> {
    jwt::sign(&config::signing_key(env)?, claims).ok()
}

fn verify(env: &Env, token: &str, audience: &str) -> Result<LinkClaims> {
    let key = config::signing_key(env)
        .ok_or_else(|| Error::not_configured("links are not configured on this deployment"))?;
    let expect = jwt::Expect {
        audience,
        issuer: None,
    };
    jwt::verify(&key, token, &expect)
        .map_err(|_| Error::not_found("this link is invalid or has expired; ask for a fresh one"))
}

/// The run page URL for `run_id` under `base_url`, or `None` when no signing key is configured.
pub fn run_page_url(env: &Env, base_url: &str, run_id: &str, now_ms: i64) -> Option<String> {
    page_url(env, base_url, "runs", run_id, RUN_PAGE_AUDIENCE, now_ms)
}

/// A signed link to `/<kind>/<id>` (as long-lived as run page links).
fn page_url(
    env: &Env,
    base_url: &str,
    kind: &str,
    id: &str,
    audience: &str,
    now_ms: i64,
) -> Option<String> {
    thread_local! {
        /// (audience, id) → (token, its expiry in seconds).
        static SIGNED: std::cell::RefCell<std::collections::HashMap<(String, String), (String, i64)>> =
            Default::default();
    }
    let now = now_ms / 1000;
    let key = (audience.to_string(), id.to_string());
    let reused = SIGNED.with(|signed| {
        signed
            .borrow()
            .get(&key)
            .filter(|(_, exp)| exp - now >= RUN_PAGE_TTL_SECS - REUSE_SECS)
            .map(|(token, _)| token.clone())
    });
    let token = match reused {
        Some(token) => token,
        None => {
            let claims = LinkClaims {
                sub: id.to_string(),
                aud: audience.to_string(),
                exp: now + RUN_PAGE_TTL_SECS,
            };
            let token = sign(env, &claims)?;
            SIGNED.with(|signed| {
                let mut signed = signed.borrow_mut();
                if signed.len() >= REUSE_MAX {
                    signed.clear();
                }
                signed.insert(key, (token.clone(), claims.exp));
            });
            token
        }
    };
    Some(format!("{base_url}/{kind}/{id}?token={token}"))
}

/// Checks that `token` is a live page token of `audience` for `id`.
fn verify_page_token(env: &Env, id: &str, token: &str, audience: &str) -> Result<()> {
    let claims = verify(env, token, audience)?;
    if claims.sub != id {
        return Err(Error::not_found("this link is not for this page"));
    }
    Ok(())
}

/// The run page URL without a token (for places others read, such as pull requests): it
/// opens only for the owner signed in.
pub fn run_page_plain_url(base_url: &str, run_id: &str) -> String {
    format!("{base_url}/runs/{run_id}")
}

/// Checks that `token` is a live run-page token for `run_id`.
pub fn verify_run_page_token(env: &Env, run_id: &str, token: &str) -> Result<()> {
    verify_page_token(env, run_id, token, RUN_PAGE_AUDIENCE)
}

const SESSION_PAGE_AUDIENCE: &str = "handoff:session-page";

/// A signed link to a work session's page, or `None` without a signing key.
pub fn session_page_url(
    env: &Env,
    base_url: &str,
    session_id: &str,
    now_ms: i64,
) -> Option<String> {
    page_url(
        env,
        base_url,
        "sessions",
        session_id,
        SESSION_PAGE_AUDIENCE,
        now_ms,
    )
}

/// Checks that `token` is a live session-page token for `session_id`.
pub fn verify_session_page_token(env: &Env, session_id: &str, token: &str) -> Result<()> {
    verify_page_token(env, session_id, token, SESSION_PAGE_AUDIENCE)
}

/// How long a worker output's download link stays valid.
pub const OUTPUT_TTL_SECS: i64 = 7 * 24 * 3600;
const OUTPUT_AUDIENCE: &str = "handoff:worker-output";

/// A signed download link for output `path` of worker run `run_id`, or `None` without a
/// signing key.
pub fn output_url(
    env: &Env,
    base_url: &str,
    run_id: &str,
    path: &str,
    now_ms: i64,
) -> Option<String> {
    let claims = LinkClaims {
        sub: format!("{run_id}/{path}"),
        aud: OUTPUT_AUDIENCE.to_string(),
        exp: now_ms / 1000 + OUTPUT_TTL_SECS,
    };
    let token = sign(env, &claims)?;
    Some(format!("{base_url}/outputs/{run_id}/{path}?token={token}"))
}

/// Checks that `token` is a live download token for output `path` of `run_id`.
pub fn verify_output_token(env: &Env, run_id: &str, path: &str, token: &str) -> Result<()> {
    let claims = verify(env, token, OUTPUT_AUDIENCE)?;
    if claims.sub != format!("{run_id}/{path}") {
        return Err(Error::not_found("this link is not for this file"));
    }
    Ok(())
}

/// The signing secret of a worker's webhook: derived from the signing key, the worker and its
/// hook id (a new hook id is a new secret); `None` without a signing key.
pub fn webhook_secret(env: &Env, worker: &str, hook_id: &str) -> Option<String> {
    let key = config::signing_key(env)?;
    let derived = crate::mac::derive_key(&key, "worker-webhook", &format!("{worker}/{hook_id}"));
    Some(format!("whsec_{derived}"))
}

/// A preview URL for `port` of a sandbox, valid until `expires_at` (seconds since the epoch):
/// an origin of its own under `HANDOFF_PREVIEW_URL`, `<port>-<expiry>-<sandbox>-<mac>.<base>`,
/// so nothing a previewed page does runs on handoff's origin. The label is a DNS name (lower
/// case, at most 63 characters) carrying an 80-bit HMAC-SHA256 of what it grants.
pub fn preview_url(env: &Env, sandbox_id: &str, port: u16, expires_at: i64) -> Result<String> {
    let base = config::preview_base(env).ok_or_else(|| {
        Error::not_configured(format!(
            "previews need an origin of their own: set {} to a wildcard base such as \
             https://preview.example.com (serving *.preview.example.com; locally \
             http://preview.localhost:8787) — see README, Previews",
            config::PREVIEW_URL
        ))
    })?;
    let body = sandbox_id
        .strip_prefix(crate::ids::SANDBOX)
        .ok_or_else(|| Error::invalid("not a sandbox id"))?;
    let expires = radix36(expires_at.max(0) as u64);
    let mac = preview_mac(env, sandbox_id, port, &expires)?;
    Ok(format!(
        "{}://{port}-{expires}-{body}-{mac}.{}{}/",
        base.scheme, base.host, base.port
    ))
}

/// The sandbox and port a preview host grants, if `host` is a live preview origin.
pub fn verify_preview_host(env: &Env, host: &str) -> Result<(String, u16)> {
    let invalid =
        || Error::not_found("this preview link is invalid or has expired; ask for a fresh one");
    let label = host.split('.').next().unwrap_or_default();
    let mut parts = label.split('-');
    let (Some(port), Some(expires), Some(body), Some(mac), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(invalid());
    };
    let port: u16 = port.parse().map_err(|_| invalid())?;
    let sandbox_id = format!("{}{body}", crate::ids::SANDBOX);
    if !crate::ids::is_valid(crate::ids::SANDBOX, &sandbox_id) {
        return Err(invalid());
    }
    let expected = preview_mac(env, &sandbox_id, port, expires)?;
    let same = crate::mac::same(expected.as_bytes(), mac.as_bytes());
    let expires_at = u64::from_str_radix(expires, 36).map_err(|_| invalid())?;
    if !same || expires_at < (crate::time::now_ms() / 1000).max(0) as u64 {
        return Err(invalid());
    }
    Ok((sandbox_id, port))
}

fn preview_mac(env: &Env, sandbox_id: &str, port: u16, expires: &str) -> Result<String> {
    let key = config::signing_key(env).ok_or_else(|| {
        Error::not_configured(format!(
            "preview links need {} (at least {} characters) on this deployment",
            config::SIGNING_KEY,
            config::MIN_SIGNING_KEY_LEN
        ))
    })?;
    Ok(crate::mac::tag(
        &key,
        "handoff:preview",
        &format!("{sandbox_id}|{port}|{expires}"),
    ))
}

fn radix36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
