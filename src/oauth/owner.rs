//! The deployment's owner on the consent and sign-in pages: the passphrase check, the signed
//! owner cookie that spares a second sign-in for a while (and opens run pages), and the CSRF
//! cookie the forms must echo.

use super::client_address;
use crate::authstore::api::RateHit;
use crate::config;
use crate::cookies::{self, get as cookie, SameSite};
use crate::ids;
use crate::jwt;
use crate::time::now_ms;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use worker::{Env, Request};

const OWNER_COOKIE: &str = "handoff_owner";
const CSRF_COOKIE: &str = "handoff_csrf";
const OWNER_AUDIENCE: &str = "handoff:owner";
/// How long the owner stays signed in on this browser.
const OWNER_SESSION_SECS: i64 = 12 * 3600;

#[derive(Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// Signs claims with `HANDOFF_SIGNING_KEY` (none when it is not configured).
pub fn sign(env: &Env, claims: &Claims) -> Option<String> {
    jwt::sign(&config::signing_key(env)?, claims).ok()
}

/// Verifies a token signed by `sign` for `audience`.
pub fn verify(env: &Env, token: &str, audience: &str) -> Option<Claims> {
    let expect = jwt::Expect {
        audience,
        issuer: None,
    };
    jwt::verify(&config::signing_key(env)?, token, &expect).ok()
}

/// Whether `presented` is the owner's passphrase (compared as digests, in constant time).
pub fn passphrase_matches(env: &Env, presented: &str) -> bool {
    let Some(expected) = config::owner_passphrase(env) else {
        return false;
    };
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    crate::mac::same(&a, &b)
}

/// Who is signed in on this browser (`passphrase` or `github:<login>`), from the owner cookie.
pub fn signed_in(env: &Env, req: &Request) -> Option<String> {
    let token = cookie(req, OWNER_COOKIE)?;
    let claims = verify(env, &token, OWNER_AUDIENCE)?;
    // A login removed from the allowed list no longer counts, even with a live cookie.
    match claims.sub.strip_prefix("github:") {
        Some(login) => config::github_sign_in(env)
            .filter(|g| g.logins.iter().any(|l| l == login))
            .map(|_| claims.sub),
        None => config::owner_passphrase(env).map(|_| claims.sub),
    }
}

/// The `Set-Cookie` value that signs `owner` in on this browser, when links can be signed.
pub fn session_cookie(env: &Env, owner: &str, secure: bool) -> Option<String> {
    let token = sign(
        env,
        &Claims {
            sub: owner.to_string(),
            aud: OWNER_AUDIENCE.to_string(),
            exp: now_ms() / 1000 + OWNER_SESSION_SECS,
            nonce: None,
        },
    )?;
    // Path `/`: the run pages need it too. HttpOnly and host-only, so previews (origins of
    // their own) never see it.
    Some(cookies::set(
        OWNER_COOKIE,
        &token,
        "/",
        SameSite::Lax,
        OWNER_SESSION_SECS,
        secure,
    ))
}

/// The browser's CSRF value: the existing cookie, or a new one with the `Set-Cookie` to send.
pub fn csrf(req: &Request, secure: bool) -> (String, Option<String>) {
    match cookie(req, CSRF_COOKIE).filter(|v| v.len() >= 32 && v.len() <= 64) {
        Some(value) => (value, None),
        None => {
            let value = ids::new_secret("");
            let header = cookies::set(
                CSRF_COOKIE,
                &value,
                "/oauth",
                SameSite::Strict,
                3600,
                secure,
            );
            (value, Some(header))
        }
    }
}

/// Whether the form's CSRF value is this browser's cookie.
pub fn csrf_matches(req: &Request, presented: Option<&str>) -> bool {
    match (cookie(req, CSRF_COOKIE), presented) {
        (Some(expected), Some(presented)) => {
            crate::mac::same(expected.as_bytes(), presented.as_bytes())
        }
        _ => false,
    }
}

/// Cookies are `Secure` whenever the page is served over https.
pub fn is_https(base: &str) -> bool {
    base.starts_with("https://")
}

/// The sign-in rate limits a request falls in: its address, and everyone together (a slow
/// guess from many addresses). `count` records a failed attempt; otherwise they are only checked.
pub fn signin_limits(env: &Env, req: &Request, count: bool) -> Vec<RateHit> {
    let limits = config::rate_limits(env);
    vec![
        RateHit::new("signin", &client_address(req), limits.signin, count),
        RateHit::new("signin", "*", limits.signin_global, count),
    ]
}
