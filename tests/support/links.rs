//! Signed links minted the way the Worker mints them (same key, audience and claims), for
//! checking expiry and tampering from the outside.

use crate::SIGNING_KEY;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

/// A preview origin for `port` of `sandbox_id` (`sbx_…`), as the Worker makes them, expiring
/// `exp_offset_secs` from now: `http://<port>-<expiry>-<sandbox>-<mac>.preview.localhost:<worker port>/`.
pub fn preview_url(worker_port: u16, sandbox_id: &str, port: u16, exp_offset_secs: i64) -> String {
    use hmac::{KeyInit, Mac};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut n = (now + exp_offset_secs).max(0) as u64;
    let mut expires = Vec::new();
    loop {
        expires.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    expires.reverse();
    let expires = String::from_utf8(expires).expect("ascii");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SIGNING_KEY.as_bytes()).expect("key");
    mac.update(format!("handoff:preview|{sandbox_id}|{port}|{expires}").as_bytes());
    let tag = mac.finalize().into_bytes();
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let (mut acc, mut bits, mut b32) = (0u32, 0u32, String::new());
    for &b in &tag[..10] {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            b32.push(ALPHABET[((acc >> bits) & 0x1f) as usize] as char);
        }
    }
    let body = sandbox_id.trim_start_matches("sbx_");
    format!(
        "http://{port}-{expires}-{body}-{b32}.{}:{worker_port}/",
        crate::PREVIEW_BASE
    )
}

/// A sandbox daemon token for `sandbox_id`, as the Worker mints them, expiring
/// `exp_offset_secs` from now.
pub fn daemon_token(sandbox_id: &str, exp_offset_secs: i64) -> String {
    daemon_token_signed(crate::DAEMON_SECRET.as_bytes(), sandbox_id, exp_offset_secs)
}

/// A sandbox daemon token for `sandbox_id` signed with `key`.
pub fn daemon_token_signed(key: &[u8], sandbox_id: &str, exp_offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let claims =
        json!({"sub": sandbox_id, "aud": "handoff-sandboxd", "exp": now + exp_offset_secs});
    let key = EncodingKey::from_secret(key).expect("key");
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

/// A session-scoped model token signed with `secret` (`scope: "session"`), as the Worker mints
/// them for a session's agent.
pub fn session_proxy_token(secret: &str, audience: &str, session_id: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let claims = json!({"iss": "handoff", "aud": audience, "sub": session_id, "jti": "tok_test",
        "exp": now + 600, "scope": "session"});
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("key");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}
