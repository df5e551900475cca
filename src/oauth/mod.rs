//! OAuth 2.1 for the MCP endpoint: handoff is its own authorization server. Discovery
//! (RFC 9728, RFC 8414), client registration (RFC 7591 and Client ID Metadata Documents), the
//! authorization-code flow with PKCE and the owner's consent page, the token and revocation
//! endpoints, and optional GitHub sign-in for the owner. State lives in the `AuthStoreObject`
//! Durable Object; `verify_access_token` is what `/mcp` authentication calls.

mod authorize;
mod clients;
mod consent;
mod github;
mod metadata;
mod owner;
pub(crate) mod params;
mod register;
mod signin;
mod token;

pub use metadata::{resource_metadata_url, SCOPE};

use crate::authstore::api::{AuthStore, VerifyAccess, ACCESS_PREFIX, ACCESS_TAG};
use crate::error::{Error, ErrorKind, Result};
use crate::http;
use crate::principal::Principal;
use serde_json::json;
use worker::{Env, Method, Request, Response};

/// Routes `/.well-known/oauth-*` and `/oauth/*`.
pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let method = req.method();
    if method == Method::Options {
        return Ok(cors(Response::empty()?.with_status(204)));
    }
    let base = http::base_url(env, &req);
    match (method, path.as_str()) {
        (Method::Get, "/.well-known/oauth-protected-resource")
        | (Method::Get, "/.well-known/oauth-protected-resource/mcp") => {
            Ok(cors(metadata::protected_resource(&base)))
        }
        (Method::Get, "/.well-known/oauth-authorization-server") => {
            Ok(cors(metadata::authorization_server(&base)))
        }
        (Method::Post, "/oauth/register") => Ok(cors(register::handle(req, env).await)),
        (Method::Post, "/oauth/token") => Ok(cors(token::token(req, env, &base).await)),
        (Method::Post, "/oauth/revoke") => Ok(cors(token::revoke(req, env).await)),
        (Method::Get, "/oauth/authorize") => authorize::start(req, env, &base).await,
        (Method::Get, "/oauth/consent") => authorize::show(req, env, &base).await,
        (Method::Post, "/oauth/consent") => authorize::decide(req, env, &base).await,
        (Method::Get, "/oauth/signin") => signin::show(req, env, &base).await,
        (Method::Post, "/oauth/signin") => signin::submit(req, env, &base).await,
        (Method::Get, "/oauth/github") => github::start(req, env, &base).await,
        (Method::Get, "/oauth/github/callback") => github::callback(req, env, &base).await,
        (_, p) if is_oauth_path(p) => Ok(method_not_allowed(p)),
        _ => Ok(http::not_found(&path)),
    }
}

/// Who is signed in as the deployment's owner on this browser, if anyone (the owner cookie).
pub fn signed_in_owner(env: &Env, req: &Request) -> Option<String> {
    owner::signed_in(env, req)
}

/// The sign-in page's URL for returning to `next` (a page of this deployment).
pub fn sign_in_url(next: &str) -> String {
    let next: String = worker::url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    format!("/oauth/signin?next={next}")
}

/// Whether `path` belongs to this module (for the router).
pub fn is_oauth_path(path: &str) -> bool {
    path.starts_with("/oauth/")
        || path == "/.well-known/oauth-protected-resource"
        || path == "/.well-known/oauth-protected-resource/mcp"
        || path == "/.well-known/oauth-authorization-server"
}

/// The principal a live access token for this deployment's MCP resource stands for, `Ok(None)`
/// when the token is not one (unknown, expired, revoked, or for another resource).
pub async fn verify_access_token(env: &Env, token: &str, base: &str) -> Result<Option<Principal>> {
    if !token.starts_with(ACCESS_PREFIX) || token.len() > 200 {
        return Ok(None);
    }
    // Tokens carry a tag under the signing key: a forged or mistyped one is refused here,
    // without a round trip to the auth store (a flood of them costs the store nothing).
    if let Some(key) = crate::config::signing_key(env) {
        if !crate::mac::is_tagged(&key, ACCESS_TAG, token) {
            return Ok(None);
        }
    }
    let key = crate::mac::sha256_hex(token.as_bytes());
    let now = crate::time::now_ms();
    let cached = VALID_ACCESS
        .with(|c| c.get(&key, now))
        .filter(|g| g.expires_at > now);
    let grant = match cached {
        Some(grant) => Some(grant),
        None => {
            let grant = AuthStore::get(env)?
                .call(
                    vec![],
                    VerifyAccess {
                        token: token.to_string(),
                    },
                )
                .await?;
            VALID_ACCESS.with(|c| match &grant {
                Some(g) => c.put(key, g.clone(), now),
                None => c.forget(&key),
            });
            grant
        }
    };
    Ok(grant
        .filter(|g| g.resource == metadata::resource(base))
        .map(|g| Principal {
            id: format!("oauth:{}", g.client_id),
        }))
}

/// How long an isolate trusts an access token the auth store accepted (never past its expiry):
/// a token revoked through another isolate still works there for at most this long. A
/// revocation through this isolate takes effect here at once.
pub const ACCESS_TRUST_MS: i64 = 5_000;

thread_local! {
    static VALID_ACCESS: crate::recent::Recent<crate::authstore::api::AccessGrant> =
        const { crate::recent::Recent::new(ACCESS_TRUST_MS, 4096) };
}

/// Forgets every access token this isolate trusted (after a revocation).
pub(crate) fn forget_trusted_tokens() {
    VALID_ACCESS.with(|c| c.clear());
}

/// An RFC 6749 error response: `{"error", "error_description"}`, never cached.
pub fn error(status: u16, code: &str, description: impl Into<String>) -> Response {
    let mut response = http::json(
        status,
        &json!({ "error": code, "error_description": description.into() }),
    );
    let headers = response.headers_mut();
    let _ = headers.set("cache-control", "no-store");
    let _ = headers.set("pragma", "no-cache");
    response
}

/// An internal `Error` in the OAuth error format.
pub fn error_from(e: &Error) -> Response {
    match e.kind {
        ErrorKind::RateLimited => {
            let mut response = error(429, "temporarily_unavailable", &e.message);
            let retry = e.retry_after_secs.unwrap_or(60).to_string();
            let _ = response.headers_mut().set("retry-after", &retry);
            response
        }
        ErrorKind::InvalidInput | ErrorKind::PortClosed => {
            error(400, "invalid_request", &e.message)
        }
        ErrorKind::NotFound => error(400, "invalid_request", &e.message),
        ErrorKind::Unavailable | ErrorKind::NotConfigured => {
            error(503, "temporarily_unavailable", &e.message)
        }
        _ => {
            worker::console_error!("oauth: {}", e.message);
            error(500, "server_error", "internal error; retry the request")
        }
    }
}

/// JSON endpoints may be called from browser-based clients (no cookies are involved).
fn cors(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let _ = headers.set("access-control-allow-origin", "*");
    let _ = headers.set("access-control-allow-methods", "GET, POST, OPTIONS");
    let _ = headers.set(
        "access-control-allow-headers",
        "authorization, content-type, mcp-protocol-version",
    );
    let _ = headers.set("access-control-max-age", "86400");
    response
}

fn method_not_allowed(path: &str) -> Response {
    error(
        405,
        "invalid_request",
        format!("{path} does not take this method"),
    )
}

/// The caller's address, for rate limits (Cloudflare sets `cf-connecting-ip`).
fn client_address(req: &Request) -> String {
    let raw = req.headers().get("cf-connecting-ip").ok().flatten();
    raw.as_deref()
        .and_then(rate_key)
        .unwrap_or_else(|| "unknown".to_string())
}

/// The rate-limit key of a client address: an IPv4 address as it is, an IPv6 address by its
/// /64 — one subscriber's allocation, whose 2^64 addresses would otherwise each count as a
/// separate client and together lock everyone out of sign-in.
fn rate_key(address: &str) -> Option<String> {
    let ip: std::net::IpAddr = address.trim().parse().ok()?;
    Some(match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::rate_key;

    #[test]
    fn ipv6_addresses_count_by_their_64() {
        assert_eq!(rate_key("203.0.113.7").as_deref(), Some("203.0.113.7"));
        assert_eq!(
            rate_key("::ffff:203.0.113.7").as_deref(),
            Some("203.0.113.7")
        );
        let a = rate_key("2001:db8:1:2:aaaa::1");
        assert_eq!(a.as_deref(), Some("2001:db8:1:2::/64"));
        assert_eq!(a, rate_key("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_ne!(a, rate_key("2001:db8:1:3::1"));
        assert_eq!(rate_key("not an address"), None);
        assert_eq!(rate_key(""), None);
    }
}
