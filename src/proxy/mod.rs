//! The credential proxy `/proxy/<service>/…`: the only way a sandbox reaches a model provider or
//! the forge. It accepts a scoped token (see `tokens`), checks that the token's run is still
//! active and — for the forge — that the repository is the run's, swaps the token for the real
//! key and streams the request to the configured upstream and the answer back. Nothing else
//! passes.
//!
//! - `/proxy/anthropic/<path>` → `ANTHROPIC_BASE_URL/<path>` (token in `x-api-key`)
//! - `/proxy/openai/<path>` → `OPENAI_BASE_URL/<path>` (token as `Authorization: Bearer`)
//!   — for both, only the calls `providers` lists (messages, completions, model listing).
//! - `/proxy/git/<owner>/<repo>.git/{info/refs,git-upload-pack,git-receive-pack}` →
//!   `FORGE_GIT_URL/…` (token as `Authorization: Bearer`, added by the sandbox's egress proxy).
//!   Pushes only while the run is in its `pushing` phase, and only to
//!   `refs/heads/handoff/<runId>` (`receive_pack` reads the commands before forwarding).
//! - `/proxy/forge/repos/<owner>/<repo>/pulls[/<n>]` (GET, POST) → `FORGE_API_URL/…`
//!
//! Model calls pass only while their run is within its budget, and their answers are metered
//! (`metered`).

mod meter;
mod metered;
mod providers;
pub(crate) mod receive_pack;

use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::http;
use crate::ledger::api::{GetRun, Ledger, SessionRun};
use crate::runs::RunRecord;
use crate::tokens::{self, ProxyClaims, Service};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use futures::StreamExt;
use worker::wasm_bindgen::JsValue;
use worker::{Env, Fetch, Headers, Method, Request, RequestInit, Response, ResponseBody};

/// Request headers passed to upstreams (everything else is dropped, credentials first).
const PASS: [&str; 8] = [
    "content-type",
    "content-encoding",
    "accept",
    "anthropic-version",
    "anthropic-beta",
    "git-protocol",
    "user-agent",
    "openai-beta",
];

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    match route(req, env).await {
        Ok(response) => Ok(response),
        Err(e) => Ok(http::json(
            e.http_status(),
            &serde_json::json!({"type": "error", "error": {"type": "handoff_proxy_error", "message": e.message}}),
        )),
    }
}

async fn route(mut req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let rest = path.trim_start_matches("/proxy/");
    let (service, tail) = rest.split_once('/').unwrap_or((rest, ""));
    match service {
        "anthropic" => {
            let query = query(&req)?;
            providers::check(Service::Anthropic, &req.method(), tail, &query)?;
            let token = header(&req, "x-api-key").or_else(|| bearer(&req));
            let (_, run) = authorize(env, token, Service::Anthropic, None).await?;
            metered::within_budget(&run)?;
            let key = secret(env, config::ANTHROPIC_API_KEY)?;
            let upstream = format!("{}/{tail}{query}", config::anthropic_base_url(env));
            let answer = forward(&req, &upstream, &[("x-api-key", key)]).await?;
            metered::metered(env, &req.method(), &run.id, answer)
        }
        "openai" => {
            let query = query(&req)?;
            providers::check(Service::OpenAi, &req.method(), tail, &query)?;
            let (_, run) = authorize(env, bearer(&req), Service::OpenAi, None).await?;
            metered::within_budget(&run)?;
            let key = secret(env, config::OPENAI_API_KEY)?;
            let upstream = format!("{}/{tail}{query}", config::openai_base_url(env));
            let body = match tail {
                "chat/completions" => Some(JsValue::from_str(&chat_request(&mut req).await?)),
                _ => req.inner().body().map(JsValue::from),
            };
            let auth = [("authorization", format!("Bearer {key}"))];
            let answer = send(&req, &upstream, &auth, body).await?;
            metered::metered(env, &req.method(), &run.id, answer)
        }
        "git" => {
            let (repo, operation) = git_target(tail, &req.method())?;
            let (_, run) = authorize(env, bearer(&req), Service::Git, Some(&repo)).await?;
            let query = query(&req)?;
            let push =
                operation == "git-receive-pack" || query.contains("service=git-receive-pack");
            let phase = run.progress.as_ref().map(|p| p.phase.as_str());
            if push && phase != Some("pushing") {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    "this run's token pushes only while handoff publishes the run's branch",
                ));
            }
            let body = if operation == "git-receive-pack" {
                Some(checked_push(&mut req, &run.id).await?)
            } else {
                req.inner().body().map(JsValue::from)
            };
            let token = secret(env, config::GITHUB_TOKEN)?;
            let basic = B64.encode(format!("x-access-token:{token}"));
            let upstream = format!(
                "{}/{repo}.git/{operation}{query}",
                config::forge_git_url(env)
            );
            send(
                &req,
                &upstream,
                &[("authorization", format!("Basic {basic}"))],
                body,
            )
            .await
        }
        "forge" => {
            let repo = forge_target(tail, &req.method())?;
            authorize(env, bearer(&req), Service::Forge, Some(&repo)).await?;
            let token = secret(env, config::GITHUB_TOKEN)?;
            let upstream = format!("{}/{tail}{}", config::forge_api_url(env), query(&req)?);
            forward(
                &req,
                &upstream,
                &[
                    ("authorization", format!("Bearer {token}")),
                    ("accept", "application/vnd.github+json".into()),
                ],
            )
            .await
        }
        _ => Err(Error::not_found(
            "unknown proxy service; the proxy serves anthropic, openai, git and forge",
        )),
    }
}

/// A chat completion request, read whole (uncompressed, within its cap) so it reports usage.
async fn chat_request(req: &mut Request) -> Result<String> {
    let encoding = header(req, "content-encoding").unwrap_or_default();
    if !encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity") {
        return Err(Error::invalid(
            "compressed model requests are not accepted by the credential proxy",
        ));
    }
    let body = http::read_capped(req, metered::MAX_CHAT_REQUEST)
        .await?
        .ok_or_else(|| Error::invalid("the chat completion request is larger than 32 MiB"))?;
    metered::with_usage(&body)
}

/// `owner/repo` and the git operation of a smart-HTTP path, or a refusal.
fn git_target(tail: &str, method: &Method) -> Result<(String, &'static str)> {
    let refuse = || Error::not_found("only git smart HTTP (clone, fetch, push) passes the proxy");
    let mut parts = tail.splitn(3, '/');
    let (owner, repo, op) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let repo = repo.strip_suffix(".git").ok_or_else(refuse)?;
    let operation = match (method, op) {
        (Method::Get, "info/refs") => "info/refs",
        (Method::Post, "git-upload-pack") => "git-upload-pack",
        (Method::Post, "git-receive-pack") => "git-receive-pack",
        _ => return Err(refuse()),
    };
    Ok((repo_name(owner, repo).ok_or_else(refuse)?, operation))
}

/// `owner/repo` of a pulls API path, or a refusal.
fn forge_target(tail: &str, method: &Method) -> Result<String> {
    let refuse =
        || Error::not_found("only the pull request API of the run's repository passes the proxy");
    if !matches!(method, Method::Get | Method::Post) {
        return Err(refuse());
    }
    let parts: Vec<&str> = tail.split('/').collect();
    match parts.as_slice() {
        ["repos", owner, repo, "pulls"] => repo_name(owner, repo).ok_or_else(refuse),
        ["repos", owner, repo, "pulls", n]
            if n.bytes().all(|b| b.is_ascii_digit()) && *method == Method::Get =>
        {
            repo_name(owner, repo).ok_or_else(refuse)
        }
        _ => Err(refuse()),
    }
}

fn repo_name(owner: &str, repo: &str) -> Option<String> {
    let ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    (ok(owner) && ok(repo)).then(|| format!("{owner}/{repo}"))
}

/// Checks the token, its repository and that its run is still going.
async fn authorize(
    env: &Env,
    token: Option<String>,
    service: Service,
    repo: Option<&str>,
) -> Result<(ProxyClaims, RunRecord)> {
    let token = token.ok_or_else(|| Error::new(ErrorKind::Unauthorized, "missing proxy token"))?;
    let claims = tokens::verify(env, &token, service)?;
    let model = matches!(service, Service::Anthropic | Service::OpenAi);
    let for_session = match claims.scope.as_deref() {
        None => false,
        Some(tokens::SESSION_SCOPE) if model => true,
        Some(_) => {
            return Err(Error::new(
                ErrorKind::Unauthorized,
                "this token's scope is not accepted here",
            ))
        }
    };
    if let Some(repo) = repo {
        if claims.repo.as_deref() != Some(repo.to_ascii_lowercase().as_str()) {
            return Err(Error::new(
                ErrorKind::Unauthorized,
                "this token is for another repository",
            ));
        }
    }
    let ledger = Ledger::get(env)?;
    let found = if for_session {
        let op = SessionRun {
            session_id: claims.sub.clone(),
        };
        ledger.call(op).await
    } else {
        let op = GetRun {
            run_id: claims.sub.clone(),
        };
        ledger.call(op).await
    };
    let run = found.map_err(|e| match e.kind {
        ErrorKind::NotFound if for_session => Error::new(
            ErrorKind::Unauthorized,
            "the token's session has no run in progress",
        ),
        ErrorKind::NotFound => {
            Error::new(ErrorKind::Unauthorized, "the token's run does not exist")
        }
        _ => e,
    })?;
    if run.status.is_terminal() {
        return Err(Error::new(
            ErrorKind::Unauthorized,
            "the run this token belongs to has ended",
        ));
    }
    Ok((claims, run))
}

/// The body of a push whose ref updates are the run's own branch only: the command section is
/// read and checked, then sent on with the rest of the stream, unread.
async fn checked_push(req: &mut Request, run_id: &str) -> Result<JsValue> {
    let encoding = header(req, "content-encoding").unwrap_or_default();
    if !encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity") {
        return Err(Error::new(
            ErrorKind::Forbidden,
            "compressed pushes are not accepted by the credential proxy",
        ));
    }
    let mut stream = req.stream()?;
    let mut head: Vec<u8> = Vec::new();
    let updates = loop {
        if let Some((updates, _)) = receive_pack::parse(&head)? {
            break updates;
        }
        if head.len() > receive_pack::MAX_COMMANDS_BYTES {
            return Err(Error::new(
                ErrorKind::Forbidden,
                "the push's command section is too long",
            ));
        }
        match stream.next().await {
            Some(chunk) => head.extend(chunk?),
            None => return Err(Error::invalid("the push ended before its commands")),
        }
    };
    receive_pack::check(&updates, run_id)?;
    let rest =
        futures::stream::once(async move { Ok::<Vec<u8>, worker::Error>(head) }).chain(stream);
    let response = worker::ResponseBuilder::new().from_stream(rest)?;
    match response.body() {
        ResponseBody::Stream(body) => Ok(body.clone().into()),
        _ => Err(Error::internal("a streamed body was expected")),
    }
}

fn secret(env: &Env, name: &str) -> Result<String> {
    config::get(env, name).ok_or_else(|| {
        Error::not_configured(format!("{name} is not configured on this deployment"))
    })
}

fn header(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .ok()
        .flatten()
        .filter(|v| !v.is_empty())
}

fn bearer(req: &Request) -> Option<String> {
    let value = header(req, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

fn query(req: &Request) -> Result<String> {
    Ok(req
        .url()?
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default())
}

/// Streams the request to `upstream` with only safe headers plus `extra`, and the answer back.
async fn forward(req: &Request, upstream: &str, extra: &[(&str, String)]) -> Result<Response> {
    send(req, upstream, extra, req.inner().body().map(JsValue::from)).await
}

/// Sends `body` to `upstream` with the request's method, its safe headers and `extra`.
async fn send(
    req: &Request,
    upstream: &str,
    extra: &[(&str, String)],
    body: Option<JsValue>,
) -> Result<Response> {
    let headers = Headers::new();
    for name in PASS {
        if let Some(value) = header(req, name) {
            headers.set(name, &value)?;
        }
    }
    for (name, value) in extra {
        headers.set(name, value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(req.method()).with_headers(headers);
    if body.is_some() {
        init.with_body(body);
    }
    let request = Request::new_with_init(upstream, &init)?;
    Fetch::Request(request)
        .send()
        .await
        .map_err(|e| Error::unavailable(format!("the upstream did not answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_smart_http_and_pulls_of_plain_repositories_pass() {
        assert_eq!(
            git_target("acme/app.git/info/refs", &Method::Get).unwrap(),
            ("acme/app".to_string(), "info/refs")
        );
        assert!(git_target("acme/app.git/git-receive-pack", &Method::Post).is_ok());
        assert!(git_target("acme/app.git/git-receive-pack", &Method::Get).is_err());
        assert!(git_target("acme/app/info/refs", &Method::Get).is_err());
        assert!(git_target("acme/../x.git/info/refs", &Method::Get).is_err());
        assert!(git_target("acme/app.git/objects/info/packs", &Method::Get).is_err());
        assert_eq!(
            forge_target("repos/acme/app/pulls", &Method::Post).unwrap(),
            "acme/app"
        );
        assert!(forge_target("repos/acme/app/pulls/3", &Method::Get).is_ok());
        assert!(forge_target("repos/acme/app/pulls/3", &Method::Post).is_err());
        assert!(forge_target("repos/acme/app/issues", &Method::Get).is_err());
        assert!(forge_target("user/repos", &Method::Get).is_err());
        assert!(forge_target("repos/acme/app/pulls", &Method::Delete).is_err());
    }
}
