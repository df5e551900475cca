//! Scoped credentials for sandboxes: HS256 tokens (signed with `PROXY_JWT_SECRET`) naming one
//! service, one run and — for the forge — one repository, expiring no later than the run's
//! deadline. The credential proxy swaps them for the real keys.
//!
//! A session's agent, which lives across the session's runs, holds a model token naming the
//! session instead (`scope: "session"`): the proxy lets it through only while one of the
//! session's runs is in progress, and counts its calls to that run.

use crate::config;
use crate::error::{Error, Result};
use crate::ids;
use crate::jwt;
use serde::{Deserialize, Serialize};
use worker::Env;

pub const ISSUER: &str = "handoff";

/// What a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Anthropic,
    OpenAi,
    /// Git smart HTTP for one repository.
    Git,
    /// The forge's pull request API for one repository.
    Forge,
}

impl Service {
    pub fn audience(self) -> &'static str {
        match self {
            Service::Anthropic => "handoff:proxy:anthropic",
            Service::OpenAi => "handoff:proxy:openai",
            Service::Git => "handoff:proxy:git",
            Service::Forge => "handoff:proxy:forge",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProxyClaims {
    pub iss: String,
    pub aud: String,
    /// The run the token belongs to.
    pub sub: String,
    pub jti: String,
    pub exp: i64,
    /// `owner/repo` for git and forge tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// [`SESSION_SCOPE`]: `sub` is a work session, and the token stands for whichever of its
    /// runs is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The scope of a model token that names a work session rather than a run.
pub const SESSION_SCOPE: &str = "session";

fn secret(env: &Env) -> Result<Vec<u8>> {
    config::proxy_secret(env).ok_or_else(|| {
        Error::not_configured(format!(
            "{} is not set (at least {} characters): runs cannot reach the model or the forge",
            config::PROXY_JWT_SECRET,
            config::MIN_SIGNING_KEY_LEN
        ))
    })
}

/// A token for `service` on behalf of `run_id`, valid until `exp` (seconds since the epoch).
pub fn mint(
    env: &Env,
    service: Service,
    run_id: &str,
    repo: Option<&str>,
    exp: i64,
) -> Result<String> {
    let repo = repo.map(str::to_ascii_lowercase);
    sign(env, service, run_id, exp, repo, None)
}

/// A model token for a work session's agent, valid until `exp`: it reaches the model only while
/// one of the session's runs is in progress.
pub fn mint_for_session(env: &Env, service: Service, session_id: &str, exp: i64) -> Result<String> {
    if !matches!(service, Service::Anthropic | Service::OpenAi) {
        return Err(Error::internal(
            "only model tokens are minted for a session",
        ));
    }
    let scope = Some(SESSION_SCOPE.to_string());
    sign(env, service, session_id, exp, None, scope)
}

fn sign(
    env: &Env,
    service: Service,
    sub: &str,
    exp: i64,
    repo: Option<String>,
    scope: Option<String>,
) -> Result<String> {
    let claims = ProxyClaims {
        iss: ISSUER.into(),
        aud: service.audience().into(),
        sub: sub.to_string(),
        jti: ids::new_id("tok_"),
        exp,
        repo,
        scope,
    };
    jwt::sign(&secret(env)?, &claims)
        .map_err(|e| Error::internal(format!("signing a proxy token: {e}")))
}

/// The claims of a live token for `service`; any other token is refused.
pub fn verify(env: &Env, token: &str, service: Service) -> Result<ProxyClaims> {
    let expect = jwt::Expect {
        audience: service.audience(),
        issuer: Some(ISSUER),
    };
    jwt::verify(&secret(env)?, token, &expect).map_err(|e| {
        Error::new(
            crate::error::ErrorKind::Unauthorized,
            format!("proxy token refused: {e}"),
        )
    })
}
