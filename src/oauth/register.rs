//! `POST /oauth/register`: Dynamic Client Registration (RFC 7591). Open to anyone, as MCP
//! clients expect, so it is rate limited per address, capped in total, and registering grants
//! nothing by itself: every authorization still needs the owner's consent.

use super::clients::{self, MAX_REDIRECT_URIS};
use super::params::read_body;
use super::{client_address, error, error_from};
use crate::authstore::api::{
    AuthMethod, AuthStore, ClientKind, ClientRecord, RateHit, RegisterClient,
};
use crate::config;
use crate::http;
use crate::ids;
use crate::time::now_ms;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{Env, Request, Response};

/// Registered clients kept at most (unused ones are forgotten after 30 days).
const MAX_CLIENTS: u32 = 10_000;

#[derive(Deserialize)]
struct Registration {
    redirect_uris: Option<Value>,
    client_name: Option<Value>,
    token_endpoint_auth_method: Option<Value>,
    grant_types: Option<Value>,
    response_types: Option<Value>,
}

/// Why a registration is refused: (`error`, `error_description`).
type Refusal = (&'static str, String);

fn metadata_error(description: impl Into<String>) -> Refusal {
    ("invalid_client_metadata", description.into())
}

fn strings(value: Option<Value>, field: &str) -> Result<Option<Vec<String>>, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Ok(s),
                _ => Err(metadata_error(format!(
                    "{field} must be an array of strings"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(metadata_error(format!(
            "{field} must be an array of strings"
        ))),
    }
}

fn string(value: Option<Value>, field: &str) -> Result<Option<String>, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(metadata_error(format!("{field} must be a string"))),
    }
}

/// Validates a registration request into a client (without its id and secret).
fn validate(body: &[u8]) -> Result<(ClientRecord, Vec<String>), Refusal> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| metadata_error(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(metadata_error("the body must be a JSON object"));
    }
    let reg: Registration = serde_json::from_value(value)
        .map_err(|e| metadata_error(format!("malformed client metadata: {e}")))?;
    let redirect_uris = strings(reg.redirect_uris, "redirect_uris")?.unwrap_or_default();
    if redirect_uris.is_empty() || redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err((
            "invalid_redirect_uri",
            format!("redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"),
        ));
    }
    for uri in &redirect_uris {
        clients::check_redirect_uri(uri).map_err(|why| ("invalid_redirect_uri", why))?;
    }
    let auth_method = match string(reg.token_endpoint_auth_method, "token_endpoint_auth_method")? {
        None => AuthMethod::ClientSecretBasic,
        Some(m) => AuthMethod::parse(&m).ok_or_else(|| {
            metadata_error(format!(
                "token_endpoint_auth_method {m:?} is not supported (none, client_secret_post, client_secret_basic)"
            ))
        })?,
    };
    let grant_types = strings(reg.grant_types, "grant_types")?
        .unwrap_or_else(|| vec!["authorization_code".to_string()]);
    if let Some(bad) = grant_types
        .iter()
        .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(metadata_error(format!(
            "grant type {bad:?} is not supported (authorization_code, refresh_token)"
        )));
    }
    if !grant_types.iter().any(|g| g == "authorization_code") {
        return Err(metadata_error(
            "grant_types must include authorization_code",
        ));
    }
    let response_types =
        strings(reg.response_types, "response_types")?.unwrap_or_else(|| vec!["code".to_string()]);
    if response_types != ["code"] {
        return Err(metadata_error("response_types must be [\"code\"]"));
    }
    let name = string(reg.client_name, "client_name")?
        .map(|n| clients::clean_name(&n))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Unnamed client".to_string());
    let client = ClientRecord {
        id: String::new(),
        kind: ClientKind::Registered,
        name,
        redirect_uris,
        auth_method,
        secret_hash: None,
        refresh: grant_types.iter().any(|g| g == "refresh_token"),
        created_at: now_ms(),
        fresh_until: None,
    };
    Ok((client, grant_types))
}

pub async fn handle(mut req: Request, env: &Env) -> Response {
    let is_json = req
        .headers()
        .get("content-type")
        .ok()
        .flatten()
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("application/json"));
    if !is_json {
        return error(
            400,
            "invalid_client_metadata",
            "send the client metadata as application/json",
        );
    }
    let body = match read_body(&mut req).await {
        Ok(body) => body,
        Err(e) => return error(413, "invalid_client_metadata", e.message),
    };
    let (mut client, grant_types) = match validate(&body) {
        Ok(valid) => valid,
        Err((code, description)) => return error(400, code, description),
    };
    client.id = ids::new_id(ids::CLIENT);
    let secret = (client.auth_method != AuthMethod::None).then(|| ids::new_secret("hnd_cs_"));
    client.secret_hash = secret
        .as_deref()
        .map(|s| crate::mac::sha256_hex(s.as_bytes()));
    let limit = RateHit::new(
        "register",
        &client_address(&req),
        config::rate_limits(env).register,
        true,
    );
    let stored = match AuthStore::get(env) {
        Ok(store) => {
            store
                .call(
                    vec![limit],
                    RegisterClient {
                        client: client.clone(),
                        max_clients: MAX_CLIENTS,
                    },
                )
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        return error_from(&e);
    }
    let mut reply = json!({
        "client_id": client.id,
        "client_id_issued_at": client.created_at / 1000,
        "client_name": client.name,
        "redirect_uris": client.redirect_uris,
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": client.auth_method.as_str(),
        "scope": super::SCOPE,
    });
    if let Some(secret) = secret {
        reply["client_secret"] = json!(secret);
        reply["client_secret_expires_at"] = json!(0);
    }
    let mut response = http::json(201, &reply);
    let _ = response.headers_mut().set("cache-control", "no-store");
    response
}
