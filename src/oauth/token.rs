//! `POST /oauth/token` (authorization_code and refresh_token grants) and `POST /oauth/revoke`
//! (RFC 7009). Both authenticate the client first: public clients by `client_id`, confidential
//! ones by their secret (form or HTTP Basic).

use super::clients::{self, ClientProblem, Presented};
use super::metadata;
use super::params::Params;
use super::{client_address, error, error_from};
use crate::authstore::api::{
    AuthStore, ClientRecord, ExchangeCode, RateHit, Refresh, Revoke, TokenReply,
};
use crate::config;
use crate::http;
use worker::{Env, Request, Response};

/// Reads the form and authenticates the client, or returns the error response.
async fn client_and_form(
    req: &mut Request,
    env: &Env,
    store: &AuthStore,
) -> Result<(ClientRecord, Params), Response> {
    let form = match Params::from_form(req).await {
        Ok(form) => form,
        Err(e) => return Err(error(400, "invalid_request", e.message)),
    };
    let presented: Presented = match clients::presented(req, &form) {
        Ok(p) => p,
        Err(why) => return Err(invalid_client(why, false)),
    };
    let client = match clients::resolve(env, store, &presented.client_id).await {
        Ok(client) => client,
        Err(ClientProblem::Internal(e)) => return Err(error_from(&e)),
        Err(problem) => {
            return Err(invalid_client(
                problem.description(&presented.client_id),
                presented.basic,
            ))
        }
    };
    if !clients::authenticate(&client, &presented) {
        return Err(invalid_client(
            "client authentication failed: wrong or missing client_secret",
            presented.basic,
        ));
    }
    Ok((client, form))
}

/// 401 `invalid_client`; clients that used Basic get a Basic challenge (RFC 6749 §5.2).
fn invalid_client(description: impl Into<String>, basic: bool) -> Response {
    let mut response = error(401, "invalid_client", description);
    if basic {
        let _ = response
            .headers_mut()
            .set("www-authenticate", "Basic realm=\"handoff\"");
    }
    response
}

/// The store, the token-endpoint rate limit this request counts against, the authenticated
/// client and the form; or the error response.
async fn prepare(
    req: &mut Request,
    env: &Env,
) -> Result<(AuthStore, RateHit, ClientRecord, Params), Response> {
    let store = AuthStore::get(env).map_err(|e| error_from(&e))?;
    let limit = RateHit::new(
        "token",
        &client_address(req),
        config::rate_limits(env).token,
        true,
    );
    let (client, form) = client_and_form(req, env, &store).await?;
    Ok((store, limit, client, form))
}

pub async fn token(mut req: Request, env: &Env, base: &str) -> Response {
    let (store, limit, client, form) = match prepare(&mut req, env).await {
        Ok(prepared) => prepared,
        Err(response) => return response,
    };
    let resource = match form.get("resource") {
        None => None,
        Some(r) => match metadata::canonical_resource(base, r) {
            Some(canonical) => Some(canonical),
            None => {
                return error(
                    400,
                    "invalid_target",
                    format!(
                        "this server issues tokens only for {}",
                        metadata::resource(base)
                    ),
                )
            }
        },
    };
    let reply = match form.get("grant_type") {
        Some("authorization_code") => {
            let Some(code) = form.get("code") else {
                return error(400, "invalid_request", "code is required");
            };
            let Some(verifier) = form.get("code_verifier") else {
                return error(400, "invalid_request", "code_verifier is required (PKCE)");
            };
            let op = ExchangeCode {
                code: code.to_string(),
                client_id: client.id.clone(),
                redirect_uri: form.get("redirect_uri").map(str::to_string),
                code_verifier: verifier.to_string(),
                resource,
            };
            store.call(vec![limit], op).await
        }
        Some("refresh_token") => {
            let Some(refresh_token) = form.get("refresh_token") else {
                return error(400, "invalid_request", "refresh_token is required");
            };
            if let Some(scope) = form.get("scope") {
                if scope.split(' ').any(|s| !s.is_empty() && s != super::SCOPE) {
                    return error(
                        400,
                        "invalid_scope",
                        format!("the only scope is {}", super::SCOPE),
                    );
                }
            }
            let op = Refresh {
                refresh_token: refresh_token.to_string(),
                client_id: client.id.clone(),
                resource,
            };
            store.call(vec![limit], op).await
        }
        Some(other) => {
            return error(
                400,
                "unsupported_grant_type",
                format!(
                    "grant_type {other:?} is not supported (authorization_code, refresh_token)"
                ),
            )
        }
        None => return error(400, "invalid_request", "grant_type is required"),
    };
    match reply {
        Ok(TokenReply::Issued { tokens }) => {
            let mut response = http::json(200, &tokens);
            let headers = response.headers_mut();
            let _ = headers.set("cache-control", "no-store");
            let _ = headers.set("pragma", "no-cache");
            response
        }
        Ok(TokenReply::Refused {
            error: code,
            description,
        }) => {
            // A reused code or refresh token revokes the tokens issued from it: nothing this
            // isolate trusted may outlive them here.
            super::forget_trusted_tokens();
            error(400, &code, description)
        }
        Err(e) => error_from(&e),
    }
}

pub async fn revoke(mut req: Request, env: &Env) -> Response {
    let (store, limit, client, form) = match prepare(&mut req, env).await {
        Ok(prepared) => prepared,
        Err(response) => return response,
    };
    let Some(token) = form.get("token") else {
        return error(400, "invalid_request", "token is required");
    };
    let op = Revoke {
        token: token.to_string(),
        client_id: client.id.clone(),
    };
    let outcome = store.call(vec![limit], op).await;
    // Whatever the token was (an access token, or a refresh token whose grant's access tokens
    // die with it), nothing this isolate trusted may outlive it here.
    super::forget_trusted_tokens();
    match outcome {
        // RFC 7009: 200 whether or not the token was known.
        Ok(_) => {
            let mut response = http::json(200, &serde_json::json!({}));
            let _ = response.headers_mut().set("cache-control", "no-store");
            response
        }
        Err(e) => error_from(&e),
    }
}
