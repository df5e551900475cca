//! Signed links minted the way the Worker mints them (same key, audience and claims), for
//! checking expiry and tampering from the outside.

use crate::SIGNING_KEY;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

/// A preview token for `port` of `sandbox_id` that expires `exp_offset_secs` from now.
pub fn preview_token(sandbox_id: &str, port: u16, exp_offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let claims = json!({"sub": sandbox_id, "aud": "handoff:preview", "exp": now + exp_offset_secs, "port": port});
    let key = EncodingKey::from_secret(SIGNING_KEY.as_bytes()).expect("key");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

/// A sandbox daemon token for `sandbox_id`, as the Worker mints them, expiring
/// `exp_offset_secs` from now.
pub fn daemon_token(sandbox_id: &str, exp_offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let claims =
        json!({"sub": sandbox_id, "aud": "handoff-sandboxd", "exp": now + exp_offset_secs});
    let key = EncodingKey::from_secret(crate::DAEMON_SECRET.as_bytes()).expect("key");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

/// A credential-proxy token signed with `secret`, as the Worker mints them.
pub fn proxy_token(
    secret: &str,
    audience: &str,
    run_id: &str,
    repo: Option<&str>,
    exp_offset_secs: i64,
) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut claims = json!({"iss": "handoff", "aud": audience, "sub": run_id, "jti": "tok_test", "exp": now + exp_offset_secs});
    if let Some(repo) = repo {
        claims["repo"] = json!(repo);
    }
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("key");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}
