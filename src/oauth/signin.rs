//! The owner's sign-in for handoff's own pages (a run page opened from a pull request, say):
//! `GET /oauth/signin?next=/runs/<id>` shows the passphrase form (and GitHub, when set up);
//! `POST /oauth/signin` checks it under the same rate limits as the consent page, signs the
//! browser in and goes back to `next`. `next` is only ever a page of this deployment.

use super::consent;
use super::owner;
use super::params::Params;
use crate::authstore::api::{AuthStore, Count};
use crate::config;
use crate::error::Result;
use crate::html;
use crate::ids;
use maud::html;
use worker::{Env, Headers, Request, Response};

/// Where a sign-in may return to: a run page or its transcript, a session's page, the secrets
/// page, or the front page.
pub fn safe_next(next: Option<&str>) -> String {
    let next = next.unwrap_or("/");
    if next == "/secrets"
        || next
            .strip_prefix("/sessions/")
            .is_some_and(|id| ids::is_valid(ids::SESSION, id))
    {
        return next.to_string();
    }
    let run = next
        .strip_prefix("/runs/")
        .map(|rest| rest.strip_suffix("/transcript").unwrap_or(rest));
    match run {
        Some(id) if ids::is_valid(ids::RUN, id) => next.to_string(),
        _ => "/".to_string(),
    }
}

/// The sign-in page for `next`.
pub fn page(
    req: &Request,
    env: &Env,
    base: &str,
    next: &str,
    problem: Option<&str>,
    status: u16,
) -> Result<Response> {
    let (csrf, set_csrf) = owner::csrf(req, owner::is_https(base));
    let passphrase = config::owner_passphrase(env).is_some();
    let github = config::github_sign_in(env).is_some();
    let body = html! {
        @if !passphrase && !github {
            p { "Sign-in is not set up on this deployment (HANDOFF_OWNER_PASSPHRASE or GitHub sign-in)." }
        } @else {
            @if let Some(problem) = problem {
                p.error role="alert" { (problem) }
            }
            p { "This page is for the owner of this handoff deployment." }
            @if passphrase {
                form method="post" action="/oauth/signin" {
                    input type="hidden" name="next" value=(next);
                    input type="hidden" name="csrf" value=(csrf);
                    label for="passphrase" { "Owner passphrase" }
                    input type="password" id="passphrase" name="passphrase"
                        autocomplete="current-password" required autofocus;
                    button.primary type="submit" { "Sign in" }
                }
            }
            @if github {
                p {
                    a.button href={ "/oauth/github?next=" (crate::http::query_value(next)) } {
                        "Sign in with GitHub"
                    }
                }
            }
        }
    };
    let mut response = html::respond(status, &html::document("Sign in", html! {}, body))?;
    if let Some(cookie) = set_csrf {
        response.headers_mut().append("set-cookie", &cookie)?;
    }
    Ok(response)
}

pub async fn show(req: Request, env: &Env, base: &str) -> Result<Response> {
    let params = Params::from_query(&req).ok();
    let next = safe_next(params.as_ref().and_then(|p| p.get("next")));
    page(&req, env, base, &next, None, 200)
}

pub async fn submit(mut req: Request, env: &Env, base: &str) -> Result<Response> {
    let form = match super::authorize::own_form(&mut req, base).await? {
        Ok(form) => form,
        Err(refusal) => return Ok(refusal),
    };
    let next = safe_next(form.get("next"));
    if !owner::csrf_matches(&req, form.get("csrf")) {
        return page(
            &req,
            env,
            base,
            &next,
            Some("The form expired; sign in again."),
            403,
        );
    }
    let store = AuthStore::get(env)?;
    if let Err(e) = store
        .call(owner::signin_limits(env, &req, false), Count {})
        .await
    {
        return consent::store_problem(&e);
    }
    match form.get("passphrase") {
        Some(p) if owner::passphrase_matches(env, p) => {
            let headers = Headers::new();
            headers.set("location", &next)?;
            headers.set("cache-control", "no-store")?;
            if let Some(cookie) = owner::session_cookie(env, "passphrase", owner::is_https(base)) {
                headers.append("set-cookie", &cookie)?;
            }
            Ok(Response::empty()?.with_status(303).with_headers(headers))
        }
        _ => {
            if let Err(e) = store
                .call(owner::signin_limits(env, &req, true), Count {})
                .await
            {
                return consent::store_problem(&e);
            }
            page(&req, env, base, &next, Some("Wrong passphrase."), 401)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_returns_only_to_pages_of_this_deployment() {
        let run = format!("/runs/{}", ids::new_id(ids::RUN));
        assert_eq!(safe_next(Some(&run)), run);
        let transcript = format!("{run}/transcript");
        assert_eq!(safe_next(Some(&transcript)), transcript);
        for bad in [
            "https://evil.example/",
            "//evil.example/runs/x",
            "/runs/../oauth/token",
            "/runs/run_x?y",
            "javascript:alert(1)",
            "/oauth/consent",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
