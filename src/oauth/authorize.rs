//! The authorization endpoint and the consent form. `GET /oauth/authorize` validates the request
//! (client, exact redirect URI, PKCE S256, state, resource) and shows the consent page;
//! `POST /oauth/consent` takes the owner's decision and sends the browser back with a one-time
//! code (or `access_denied`), `state` and `iss` (RFC 9207).

use super::clients::{self, ClientProblem};
use super::consent::{self, ConsentView};
use super::metadata;
use super::owner;
use super::params::Params;
use super::{client_address, SCOPE};
use crate::authstore::api::{
    Approve, AuthRequest, AuthStore, Count, Decided, Deny, GetRequest, OpenRequest, PendingRequest,
    RateHit,
};
use crate::config;
use crate::error::{Error, Result};
use worker::{Env, Headers, Request, Response, Url};

const MAX_STATE_LEN: usize = 1024;

pub async fn start(req: Request, env: &Env, base: &str) -> Result<Response> {
    let params = match Params::from_query(&req) {
        Ok(params) => params,
        Err(e) => return consent::error_page(400, "Invalid authorization request", &e.message),
    };
    if !config::owner_sign_in_configured(env) {
        return consent::error_page(
            503,
            "Sign-in is not set up",
            &format!(
                "This handoff deployment has no owner sign-in configured, so no app can be authorized. Its operator must set {} (or GitHub sign-in); see the README.",
                config::OWNER_PASSPHRASE
            ),
        );
    }
    let Some(client_id) = params.get("client_id") else {
        return consent::error_page(
            400,
            "Invalid authorization request",
            "client_id is required",
        );
    };
    let store = AuthStore::get(env)?;
    let client = match clients::resolve(env, &store, client_id).await {
        Ok(client) => client,
        Err(ClientProblem::Internal(e)) => return Err(e),
        Err(problem) => {
            return consent::error_page(
                400,
                "Unknown app",
                &format!("invalid_client: {}", problem.description(client_id)),
            )
        }
    };
    let (redirect_uri, redirect_uri_given) = match params.get("redirect_uri") {
        Some(uri) if client.redirect_uris.iter().any(|r| r == uri) => (uri.to_string(), true),
        Some(uri) => {
            return consent::error_page(
                400,
                "Redirect not allowed",
                &format!("redirect_uri {uri:?} is not one that {} registered, so nothing was sent to it. Registered: {}.", client.name, client.redirect_uris.join(", ")),
            )
        }
        None if client.redirect_uris.len() == 1 => (client.redirect_uris[0].clone(), false),
        None => {
            return consent::error_page(
                400,
                "Invalid authorization request",
                "redirect_uri is required: this app registered several",
            )
        }
    };
    // From here on, problems go back to the (verified) redirect URI.
    let state = params.get("state");
    let back = |code: &str, description: &str| {
        let mut pairs = vec![("error", code), ("error_description", description)];
        if let Some(state) = state {
            pairs.push(("state", state));
        }
        pairs.push(("iss", base));
        redirect(&redirect_uri, &pairs, None)
    };
    if params.get("response_type") != Some("code") {
        return back("unsupported_response_type", "response_type must be code");
    }
    let Some(state) = state else {
        return back(
            "invalid_request",
            "state is required: send an unguessable value and check it comes back",
        );
    };
    if state.len() > MAX_STATE_LEN {
        return back("invalid_request", "state is longer than 1024 characters");
    }
    let Some(code_challenge) = params.get("code_challenge") else {
        return back(
            "invalid_request",
            "code_challenge is required (PKCE with S256)",
        );
    };
    if params.get("code_challenge_method") != Some("S256") {
        return back("invalid_request", "code_challenge_method must be S256");
    }
    if !is_valid_challenge(code_challenge) {
        return back(
            "invalid_request",
            "code_challenge must be a base64url SHA-256 (43 characters)",
        );
    }
    let resource = match params.get("resource") {
        None => metadata::resource(base),
        Some(requested) => match metadata::canonical_resource(base, requested) {
            Some(resource) => resource,
            None => {
                return back(
                    "invalid_target",
                    &format!(
                        "this server issues tokens only for {}",
                        metadata::resource(base)
                    ),
                )
            }
        },
    };
    let request = AuthRequest {
        client_id: client.id.clone(),
        client_name: client.name.clone(),
        client_kind: client.kind,
        redirect_uri: redirect_uri.clone(),
        redirect_uri_given,
        state: state.to_string(),
        code_challenge: code_challenge.to_string(),
        resource,
        scope: SCOPE.to_string(),
    };
    let limit = RateHit::new(
        "authorize",
        &client_address(&req),
        config::rate_limits(env).authorize,
        true,
    );
    let pending: PendingRequest = match store.call(vec![limit], OpenRequest { request }).await {
        Ok(pending) => pending,
        Err(e) => return consent::store_problem(&e),
    };
    render(&req, env, base, &pending, None, 200)
}

/// `GET /oauth/consent?request=…`: the consent page of a pending request again (after GitHub
/// sign-in, or a reload).
pub async fn show(req: Request, env: &Env, base: &str) -> Result<Response> {
    let params = Params::from_query(&req).ok();
    let id = params.as_ref().and_then(|p| p.get("request")).unwrap_or("");
    match AuthStore::get(env)?
        .call(vec![], GetRequest { id: id.to_string() })
        .await
    {
        Ok(pending) => render(&req, env, base, &pending, None, 200),
        Err(e) => consent::store_problem(&e),
    }
}

/// The form of a POST sent from one of this deployment's own pages, or the page refusing it.
pub(super) async fn own_form(
    req: &mut Request,
    base: &str,
) -> Result<std::result::Result<Params, Response>> {
    if !same_origin(req, base) {
        return consent::error_page(
            403,
            "Refused",
            "This form was sent from another site, so it was ignored.",
        )
        .map(Err);
    }
    match Params::from_form(req).await {
        Ok(form) => Ok(Ok(form)),
        Err(e) => consent::error_page(400, "Invalid form", &e.message).map(Err),
    }
}

pub async fn decide(mut req: Request, env: &Env, base: &str) -> Result<Response> {
    let form = match own_form(&mut req, base).await? {
        Ok(form) => form,
        Err(refusal) => return Ok(refusal),
    };
    let id = form.get("request").unwrap_or("");
    if !owner::csrf_matches(&req, form.get("csrf")) {
        return consent::error_page(
            403,
            "Form expired",
            "This form expired or did not come from this page. Reload the consent page and decide again.",
        );
    }
    let store = AuthStore::get(env)?;
    let decided: Decided = match form.get("decision") {
        Some("deny") => match store.call(vec![], Deny { id: id.to_string() }).await {
            Ok(decided) => decided,
            Err(e) => return consent::store_problem(&e),
        },
        Some("approve") => {
            let mut new_session = None;
            let owner = match owner::signed_in(env, &req) {
                Some(owner) => owner,
                None => {
                    let pending = match store
                        .call(
                            owner::signin_limits(env, &req, false),
                            GetRequest { id: id.to_string() },
                        )
                        .await
                    {
                        Ok(pending) => pending,
                        Err(e) => return consent::store_problem(&e),
                    };
                    match form.get("passphrase") {
                        Some(p) if owner::passphrase_matches(env, p) => {
                            new_session =
                                owner::session_cookie(env, "passphrase", owner::is_https(base));
                            "passphrase".to_string()
                        }
                        Some(_) => {
                            if let Err(e) = store
                                .call(owner::signin_limits(env, &req, true), Count {})
                                .await
                            {
                                return consent::store_problem(&e);
                            }
                            return render(
                                &req,
                                env,
                                base,
                                &pending,
                                Some("Wrong passphrase."),
                                401,
                            );
                        }
                        None => {
                            return render(
                                &req,
                                env,
                                base,
                                &pending,
                                Some("Sign in first: enter the owner passphrase."),
                                400,
                            );
                        }
                    }
                }
            };
            match store
                .call(
                    vec![],
                    Approve {
                        id: id.to_string(),
                        owner,
                    },
                )
                .await
            {
                Ok(decided) => return finish(decided, base, new_session),
                Err(e) => return consent::store_problem(&e),
            }
        }
        _ => return consent::error_page(400, "Invalid form", "decision must be approve or deny"),
    };
    finish(decided, base, None)
}

/// Sends the browser back to the client with the code (or `access_denied`), `state` and `iss`.
fn finish(decided: Decided, base: &str, set_cookie: Option<String>) -> Result<Response> {
    let mut pairs: Vec<(&str, &str)> = match &decided.code {
        Some(code) => vec![("code", code.as_str())],
        None => vec![
            ("error", "access_denied"),
            ("error_description", "the owner denied the request"),
        ],
    };
    pairs.push(("state", &decided.state));
    pairs.push(("iss", base));
    redirect(&decided.redirect_uri, &pairs, set_cookie)
}

fn render(
    req: &Request,
    env: &Env,
    base: &str,
    pending: &PendingRequest,
    problem: Option<&str>,
    status: u16,
) -> Result<Response> {
    let (csrf, set_csrf) = owner::csrf(req, owner::is_https(base));
    let owner = owner::signed_in(env, req);
    let page = consent::page(&ConsentView {
        pending,
        csrf: &csrf,
        owner: owner.as_deref(),
        passphrase_enabled: config::owner_passphrase(env).is_some(),
        github_enabled: config::github_sign_in(env).is_some(),
        problem,
    });
    let mut response = crate::html::respond(status, &page)?;
    if let Some(cookie) = set_csrf {
        response.headers_mut().append("set-cookie", &cookie)?;
    }
    Ok(response)
}

/// A 302 to `uri` with `pairs` added to its query.
pub fn redirect(uri: &str, pairs: &[(&str, &str)], set_cookie: Option<String>) -> Result<Response> {
    let mut url =
        Url::parse(uri).map_err(|e| Error::internal(format!("stored redirect URI: {e}")))?;
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in pairs {
            query.append_pair(key, value);
        }
    }
    let headers = Headers::new();
    headers.set("location", url.as_str())?;
    headers.set("cache-control", "no-store")?;
    headers.set("referrer-policy", "no-referrer")?;
    if let Some(cookie) = set_cookie {
        headers.append("set-cookie", &cookie)?;
    }
    Ok(Response::empty()?.with_status(302).with_headers(headers))
}

/// A browser form post must come from this deployment's own pages (Origin, when sent).
fn same_origin(req: &Request, base: &str) -> bool {
    let Some(origin) = req.headers().get("origin").ok().flatten() else {
        return true;
    };
    let own = req.url().ok().map(|u| u.origin().ascii_serialization());
    origin == base || Some(origin) == own
}

fn is_valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
