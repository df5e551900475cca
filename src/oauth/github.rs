//! Optional owner sign-in with GitHub (an OAuth App): `GET /oauth/github?request=…` (a consent
//! request) or `?next=/runs/…` (a page to return to) sends the browser to GitHub with a signed state bound to this browser by a nonce cookie; the callback
//! exchanges the code, reads the user's login, and signs the owner in when the login is listed
//! in `HANDOFF_OWNER_GITHUB_LOGINS`. GitHub's token is used for that one call and dropped.

use super::consent;
use super::owner::{self, Claims};
use super::params::Params;
use crate::authstore::api::{AuthStore, Count, GetRequest};
use crate::config::{self, GithubSignIn};
use crate::cookies::{self, SameSite};
use crate::error::{Error, Result};
use crate::ids;
use crate::time::now_ms;
use futures::future::{select, Either};
use serde::Deserialize;
use std::time::Duration;
use worker::{url, Delay, Env, Fetch, Headers, Method, Request, RequestInit, Response};

const STATE_AUDIENCE: &str = "handoff:github-state";
/// A state subject that is a page to return to rather than a consent request.
const NEXT_PREFIX: &str = "next:";
const NONCE_COOKIE: &str = "handoff_github";
const STATE_TTL_SECS: i64 = 600;
const TIMEOUT: Duration = Duration::from_secs(10);

fn callback_url(base: &str) -> String {
    format!("{base}/oauth/github/callback")
}

pub async fn start(req: Request, env: &Env, base: &str) -> Result<Response> {
    let Some(github) = config::github_sign_in(env) else {
        return consent::error_page(
            404,
            "Not available",
            "GitHub sign-in is not configured on this deployment.",
        );
    };
    let params = Params::from_query(&req).ok();
    // Back to a consent request, or to a page of this deployment (`next`).
    let subject = match params.as_ref().and_then(|p| p.get("next")) {
        Some(next) => format!("{NEXT_PREFIX}{}", super::signin::safe_next(Some(next))),
        None => {
            let id = params.as_ref().and_then(|p| p.get("request")).unwrap_or("");
            if let Err(e) = AuthStore::get(env)?
                .call(vec![], GetRequest { id: id.to_string() })
                .await
            {
                return consent::error_page(404, "Request expired", &e.message);
            }
            id.to_string()
        }
    };
    let nonce = ids::new_secret("");
    let state = owner::sign(
        env,
        &Claims {
            sub: subject,
            aud: STATE_AUDIENCE.to_string(),
            exp: now_ms() / 1000 + STATE_TTL_SECS,
            nonce: Some(nonce.clone()),
        },
    )
    .ok_or_else(|| Error::not_configured("GitHub sign-in needs HANDOFF_SIGNING_KEY"))?;
    let mut target = url::Url::parse(&format!("{}/login/oauth/authorize", github.oauth_url))
        .map_err(|e| Error::not_configured(format!("GITHUB_OAUTH_URL: {e}")))?;
    target
        .query_pairs_mut()
        .append_pair("client_id", &github.client_id)
        .append_pair("redirect_uri", &callback_url(base))
        .append_pair("state", &state)
        .append_pair("allow_signup", "false");
    let headers = Headers::new();
    headers.set("location", target.as_str())?;
    headers.set("cache-control", "no-store")?;
    headers.append(
        "set-cookie",
        &cookies::set(
            NONCE_COOKIE,
            &nonce,
            "/oauth/github",
            SameSite::Lax,
            STATE_TTL_SECS,
            owner::is_https(base),
        ),
    )?;
    Ok(Response::empty()?.with_status(302).with_headers(headers))
}

pub async fn callback(req: Request, env: &Env, base: &str) -> Result<Response> {
    let Some(github) = config::github_sign_in(env) else {
        return consent::error_page(
            404,
            "Not available",
            "GitHub sign-in is not configured on this deployment.",
        );
    };
    let params = match Params::from_query(&req) {
        Ok(p) => p,
        Err(e) => return consent::error_page(400, "GitHub sign-in failed", &e.message),
    };
    let claims = params
        .get("state")
        .and_then(|s| owner::verify(env, s, STATE_AUDIENCE))
        .filter(|c| c.nonce.is_some() && c.nonce == cookies::get(&req, NONCE_COOKIE));
    let Some(claims) = claims else {
        return consent::error_page(
            400,
            "GitHub sign-in failed",
            "The sign-in expired or was started in another browser. Go back to your app and connect again.",
        );
    };
    if let Some(error) = params.get("error") {
        return consent::error_page(
            403,
            "GitHub sign-in cancelled",
            &format!("GitHub answered {error}. Reload the consent page to try again."),
        );
    }
    let Some(code) = params.get("code") else {
        return consent::error_page(400, "GitHub sign-in failed", "GitHub sent no code.");
    };
    let store = AuthStore::get(env)?;
    let next = claims.sub.strip_prefix(NEXT_PREFIX).map(str::to_string);
    let checked = match &next {
        Some(_) => store
            .call(owner::signin_limits(env, &req, false), Count {})
            .await
            .map(|_| ()),
        None => store
            .call(
                owner::signin_limits(env, &req, false),
                GetRequest {
                    id: claims.sub.clone(),
                },
            )
            .await
            .map(|_| ()),
    };
    if let Err(e) = checked {
        return consent::store_problem(&e);
    }
    let login = match github_login(&github, code, base).await {
        Ok(login) => login,
        Err(e) => {
            return consent::error_page(502, "GitHub sign-in failed", &e.message);
        }
    };
    if !github
        .logins
        .iter()
        .any(|l| *l == login.to_ascii_lowercase())
    {
        if let Err(e) = store
            .call(owner::signin_limits(env, &req, true), Count {})
            .await
        {
            return consent::store_problem(&e);
        }
        return consent::error_page(
            403,
            "Not the owner",
            &format!(
                "GitHub user {login} may not sign in to this deployment (it is not in {}).",
                config::OWNER_GITHUB_LOGINS
            ),
        );
    }
    let owner = format!("github:{}", login.to_ascii_lowercase());
    let headers = Headers::new();
    let location = match next {
        Some(next) => super::signin::safe_next(Some(&next)),
        None => format!("/oauth/consent?request={}", claims.sub),
    };
    headers.set("location", &location)?;
    headers.set("cache-control", "no-store")?;
    if let Some(cookie) = owner::session_cookie(env, &owner, owner::is_https(base)) {
        headers.append("set-cookie", &cookie)?;
    }
    headers.append(
        "set-cookie",
        &cookies::set(
            NONCE_COOKIE,
            "",
            "/oauth/github",
            SameSite::Lax,
            0,
            owner::is_https(base),
        ),
    )?;
    Ok(Response::empty()?.with_status(302).with_headers(headers))
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct User {
    login: String,
}

/// Exchanges GitHub's code and reads who signed in.
async fn github_login(github: &GithubSignIn, code: &str, base: &str) -> Result<String> {
    let form: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", &github.client_id)
        .append_pair("client_secret", &github.client_secret)
        .append_pair("code", code)
        .append_pair("redirect_uri", &callback_url(base))
        .finish();
    let headers = Headers::new();
    headers.set("accept", "application/json")?;
    headers.set("content-type", "application/x-www-form-urlencoded")?;
    headers.set("user-agent", "handoff")?;
    let answer: TokenAnswer = send(
        &format!("{}/login/oauth/access_token", github.oauth_url),
        Method::Post,
        headers,
        Some(form),
    )
    .await?;
    let token = match (answer.access_token, answer.error) {
        (Some(token), _) => token,
        (None, error) => {
            return Err(Error::unavailable(format!(
                "GitHub refused the sign-in: {} {}",
                error.unwrap_or_default(),
                answer.error_description.unwrap_or_default()
            )))
        }
    };
    let headers = Headers::new();
    headers.set("accept", "application/vnd.github+json")?;
    headers.set("authorization", &format!("Bearer {token}"))?;
    headers.set("user-agent", "handoff")?;
    let user: User = send(
        &format!("{}/user", github.api_url),
        Method::Get,
        headers,
        None,
    )
    .await?;
    Ok(user.login)
}

async fn send<T: serde::de::DeserializeOwned>(
    url: &str,
    method: Method,
    headers: Headers,
    body: Option<String>,
) -> Result<T> {
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(body.into()));
    }
    let request = Request::new_with_init(url, &init)?;
    let fetch = Fetch::Request(request);
    let fetch = Box::pin(fetch.send());
    let timer = Box::pin(Delay::from(TIMEOUT));
    let mut response = match select(fetch, timer).await {
        Either::Left((Ok(response), _)) => response,
        Either::Left((Err(e), _)) => {
            return Err(Error::unavailable(format!(
                "GitHub could not be reached: {e}"
            )))
        }
        Either::Right(_) => return Err(Error::unavailable("GitHub did not answer in time")),
    };
    let status = response.status_code();
    if status != 200 {
        return Err(Error::unavailable(format!("GitHub answered HTTP {status}")));
    }
    let text = response.text().await?;
    serde_json::from_str(&text).map_err(|_| Error::unavailable("GitHub's answer could not be read"))
}
