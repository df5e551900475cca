//! Who is calling. `authenticate` turns the `Authorization` header into a `Principal`; each kind
//! of credential is one verifier behind it: static API tokens (compared in constant time) and
//! OAuth access tokens (checked in the OAuth store, bound to this deployment's MCP URL).

use crate::config::{self, ApiToken};
use crate::oauth;
use crate::principal::Principal;
use sha2::{Digest, Sha256};
use worker::{Env, Headers};

/// Why a request was refused; each maps to a 401 (or 503 when nothing is configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization: Bearer …` header.
    Missing,
    /// A bearer token that no verifier accepts.
    Invalid,
    /// The deployment has no credentials configured at all.
    NotConfigured,
    /// The OAuth store could not be asked (transient: 503).
    Unavailable,
}

impl AuthError {
    pub fn message(&self) -> String {
        match self {
            AuthError::Missing => {
                "missing credentials: send `Authorization: Bearer <token>` with an API token or an OAuth access token (see README, client setup)"
                    .into()
            }
            AuthError::Invalid => "invalid, expired or revoked bearer token".into(),
            AuthError::NotConfigured => format!(
                "this deployment has no credentials configured: set the {} secret or an owner sign-in ({}) (see README)",
                config::API_TOKENS,
                config::OWNER_PASSPHRASE
            ),
            AuthError::Unavailable => "credentials could not be checked right now; retry".into(),
        }
    }

    /// The `WWW-Authenticate` challenge sent with a 401: RFC 6750, with the protected resource
    /// metadata URL (RFC 9728) and scope OAuth clients start their discovery from.
    pub fn challenge(&self, base: &str) -> String {
        let common = format!(
            r#"Bearer realm="handoff", resource_metadata="{}", scope="{}""#,
            oauth::resource_metadata_url(base),
            oauth::SCOPE
        );
        match self {
            AuthError::Invalid => format!(
                r#"{common}, error="invalid_token", error_description="the bearer token is not valid""#
            ),
            _ => common,
        }
    }
}

/// Authenticates a request from its headers; `base` is the deployment's URL (OAuth tokens are
/// bound to its MCP endpoint).
pub async fn authenticate(
    env: &Env,
    headers: &Headers,
    base: &str,
) -> Result<Principal, AuthError> {
    let tokens = config::api_tokens(env);
    if tokens.is_empty() && !config::owner_sign_in_configured(env) {
        return Err(AuthError::NotConfigured);
    }
    let header = headers.get("authorization").ok().flatten();
    let presented = header
        .as_deref()
        .and_then(bearer_token)
        .ok_or(AuthError::Missing)?;
    if let Some(principal) = verify_static_token(&tokens, presented) {
        return Ok(principal);
    }
    match oauth::verify_access_token(env, presented, base).await {
        Ok(Some(principal)) => Ok(principal),
        Ok(None) => Err(AuthError::Invalid),
        Err(e) => {
            worker::console_error!("checking an OAuth access token: {}", e.message);
            Err(AuthError::Unavailable)
        }
    }
}

/// Extracts the token from `Bearer <token>` (scheme case-insensitive).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Compares the presented token with every configured one in constant time: both sides are
/// hashed to fixed-length digests and all tokens are always compared, so neither the position of
/// a match nor the length of a secret shows in the timing.
fn verify_static_token(tokens: &[ApiToken], presented: &str) -> Option<Principal> {
    let presented = Sha256::digest(presented.as_bytes());
    let mut found: Option<&ApiToken> = None;
    for token in tokens {
        let expected = Sha256::digest(token.value.as_bytes());
        if crate::mac::same(&expected, &presented) && found.is_none() {
            found = Some(token);
        }
    }
    found.map(|t| Principal { id: t.name.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[test]
    fn static_tokens_match_exactly() {
        let tokens = config::parse_api_tokens("a:aaaaaaaaaaaaaaaa,b:bbbbbbbbbbbbbbbb");
        assert_eq!(
            verify_static_token(&tokens, "bbbbbbbbbbbbbbbb").map(|p| p.id),
            Some("b".to_string())
        );
        assert_eq!(verify_static_token(&tokens, "bbbbbbbbbbbbbbb"), None);
        assert_eq!(verify_static_token(&tokens, "bbbbbbbbbbbbbbbbb"), None);
    }
}
