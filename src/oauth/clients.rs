//! OAuth clients: the redirect-URI rules, Client ID Metadata Documents (an https `client_id`
//! whose JSON is fetched, validated and cached), finding a client by id, and client
//! authentication at the token and revocation endpoints.

use crate::authstore::api::{
    AuthMethod, AuthStore, ClientKind, ClientRecord, GetClient, PutDocumentClient,
};
use crate::config;
use crate::error::Error;
use crate::mac;
use crate::time::now_ms;
use base64::Engine;
use futures::future::{select, Either};
use futures::StreamExt;
use serde::Deserialize;
use std::time::Duration;
use worker::{url, Delay, Env, Fetch, Headers, Method, Request, RequestInit, Url};

pub const MAX_REDIRECT_URIS: usize = 10;
pub const MAX_URI_LEN: usize = 2000;
pub const MAX_NAME_CHARS: usize = 100;
/// Client metadata documents larger than this are refused.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
const MAX_CLIENT_ID_URL_LEN: usize = 512;
/// A fetched metadata document is trusted this long before it is fetched again.
const DOCUMENT_TTL_MS: i64 = 3600 * 1000;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Schemes a redirect URI may never use.
const FORBIDDEN_SCHEMES: [&str; 10] = [
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "ftp",
    "ws",
    "wss",
    "filesystem",
];

/// Checks one redirect URI: https anywhere; http only to a loopback host (native apps, RFC
/// 8252); or a private-use scheme such as `cursor://…`. Never a fragment or user info.
pub fn check_redirect_uri(uri: &str) -> std::result::Result<(), String> {
    if uri.len() > MAX_URI_LEN {
        return Err(format!("redirect URI longer than {MAX_URI_LEN} characters"));
    }
    let url =
        crate::urls::parse(uri).map_err(|e| format!("{uri:?} is not an absolute URI ({e})"))?;
    if url.fragment().is_some() {
        return Err(format!(
            "{uri:?} has a fragment (#…), which redirect URIs may not have"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{uri:?} contains user info"));
    }
    match url.scheme() {
        "https" => url
            .host_str()
            .map(|_| ())
            .ok_or_else(|| format!("{uri:?} has no host")),
        "http" => {
            if is_loopback(&url) {
                Ok(())
            } else {
                Err(format!(
                    "{uri:?} uses http: only https, http://localhost / 127.0.0.1 / [::1] (native apps) or a private-use scheme are allowed"
                ))
            }
        }
        scheme if FORBIDDEN_SCHEMES.contains(&scheme) => Err(format!(
            "{uri:?} uses the {scheme}: scheme, which is not allowed"
        )),
        _ => Ok(()),
    }
}

fn is_loopback(url: &Url) -> bool {
    matches!(
        url.host_str(),
        Some("localhost") | Some("127.0.0.1") | Some("[::1]")
    )
}

/// What people see for a redirect URI on the consent page: its host, or its scheme for apps.
pub fn redirect_label(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(url) => match url.host_str() {
            Some(host) if matches!(url.scheme(), "http" | "https") => match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            },
            _ => format!("the app that handles {}: links", url.scheme()),
        },
        Err(_) => uri.to_string(),
    }
}

/// A display name: control characters removed, whitespace collapsed, length capped.
pub fn clean_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    cleaned.chars().take(MAX_NAME_CHARS).collect()
}

/// Whether `client_id` is meant as a metadata document URL (rather than a registered id).
pub fn is_document_id(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Checks a metadata-document client id: an https URL with a path, no fragment, no user info,
/// no dot segments; http on loopback only when the development switch is on.
pub fn check_document_id(env: &Env, client_id: &str) -> std::result::Result<Url, String> {
    if client_id.len() > MAX_CLIENT_ID_URL_LEN {
        return Err(format!(
            "client_id URLs may be at most {MAX_CLIENT_ID_URL_LEN} characters"
        ));
    }
    let url =
        crate::urls::parse(client_id).map_err(|e| format!("client_id is not a valid URL ({e})"))?;
    let https = url.scheme() == "https";
    let dev_http =
        url.scheme() == "http" && is_loopback(&url) && config::dev_loopback_client_ids(env);
    if !https && !dev_http {
        return Err("a client_id URL must use https".into());
    }
    if url.as_str() != client_id {
        return Err("client_id URL must be in normalized form".into());
    }
    if url.path() == "/" || url.path().is_empty() {
        return Err("a client_id URL must have a path".into());
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err("a client_id URL may not have a fragment or user info".into());
    }
    if client_id.contains("/./") || client_id.contains("/../") {
        return Err("a client_id URL may not contain . or .. segments".into());
    }
    Ok(url)
}

#[derive(Deserialize)]
struct Document {
    client_id: String,
    #[serde(default)]
    client_name: Option<String>,
    redirect_uris: Vec<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    client_secret: Option<serde_json::Value>,
}

/// Validates a fetched metadata document for `client_id`.
pub fn parse_document(
    client_id: &str,
    body: &[u8],
    now: i64,
) -> std::result::Result<ClientRecord, String> {
    let doc: Document = serde_json::from_slice(body)
        .map_err(|e| format!("the document is not valid client metadata JSON ({e})"))?;
    if doc.client_id != client_id {
        return Err(format!(
            "the document's client_id ({:?}) is not the URL it was fetched from",
            doc.client_id
        ));
    }
    if doc.client_secret.is_some() {
        return Err("a metadata document may not contain a client_secret".into());
    }
    match doc.token_endpoint_auth_method.as_deref() {
        None | Some("none") => {}
        Some(other) => {
            return Err(format!(
                "token_endpoint_auth_method {other:?} is not supported for metadata documents (only \"none\")"
            ))
        }
    }
    if doc.redirect_uris.is_empty() || doc.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(format!(
            "redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"
        ));
    }
    for uri in &doc.redirect_uris {
        check_redirect_uri(uri)?;
    }
    let host = Url::parse(client_id)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let name = doc
        .client_name
        .as_deref()
        .map(clean_name)
        .filter(|n| !n.is_empty())
        .unwrap_or(host);
    let grants = doc
        .grant_types
        .unwrap_or_else(|| vec!["authorization_code".into()]);
    Ok(ClientRecord {
        id: client_id.to_string(),
        kind: ClientKind::Document,
        name,
        redirect_uris: doc.redirect_uris,
        auth_method: AuthMethod::None,
        secret_hash: None,
        refresh: grants.iter().any(|g| g == "refresh_token"),
        created_at: now,
        fresh_until: Some(now + DOCUMENT_TTL_MS),
    })
}

/// Fetches a metadata document: GET, no redirects, five seconds and 64 KiB at most for the
/// whole exchange — the body is read in chunks against the same deadline and dropped as soon
/// as it grows past the cap, before any parsing.
async fn fetch_document(url: &Url) -> std::result::Result<Vec<u8>, String> {
    let headers = Headers::new();
    let _ = headers.set("accept", "application/json");
    let _ = headers.set("user-agent", "handoff-oauth");
    let mut init = RequestInit::new();
    init.with_method(Method::Get)
        .with_headers(headers)
        .with_redirect(worker::RequestRedirect::Manual);
    let request = Request::new_with_init(url.as_str(), &init).map_err(|e| e.to_string())?;
    let exchange = async move {
        let mut response = Fetch::Request(request)
            .send()
            .await
            .map_err(|e| format!("could not fetch it ({e})"))?;
        let status = response.status_code();
        if status != 200 {
            return Err(format!("fetching it answered HTTP {status}"));
        }
        let too_large = || format!("it is larger than {} KiB", MAX_DOCUMENT_BYTES / 1024);
        let declared = response
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > MAX_DOCUMENT_BYTES) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let mut stream = response.stream().map_err(|e| e.to_string())?;
        while let Some(chunk) = stream.next().await {
            body.extend(chunk.map_err(|e| e.to_string())?);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(too_large());
            }
        }
        Ok(body)
    };
    let timer = Box::pin(Delay::from(FETCH_TIMEOUT));
    match select(Box::pin(exchange), timer).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err("fetching it timed out".into()),
    }
}

/// Why a client could not be used.
pub enum ClientProblem {
    /// No such registered client (`invalid_client`: the client should register again).
    Unknown,
    /// A metadata document that cannot be used, with the reason.
    BadDocument(String),
    Internal(Error),
}

impl ClientProblem {
    pub fn description(&self, client_id: &str) -> String {
        match self {
            ClientProblem::Unknown => format!(
                "client {client_id:?} is not registered with this server (it may have been registered with an earlier installation); register again"
            ),
            ClientProblem::BadDocument(why) => {
                format!("the client metadata document at {client_id} cannot be used: {why}")
            }
            ClientProblem::Internal(e) => e.message.clone(),
        }
    }
}

impl From<Error> for ClientProblem {
    fn from(e: Error) -> Self {
        ClientProblem::Internal(e)
    }
}

/// Finds a client: a registered one in the store, or a metadata document (cached copy while
/// fresh, else fetched, validated and cached).
pub async fn resolve(
    env: &Env,
    store: &AuthStore,
    client_id: &str,
) -> std::result::Result<ClientRecord, ClientProblem> {
    if client_id.len() > MAX_URI_LEN {
        return Err(ClientProblem::Unknown);
    }
    let now = now_ms();
    if !is_document_id(client_id) {
        return store
            .call(
                vec![],
                GetClient {
                    id: client_id.to_string(),
                },
            )
            .await?
            .ok_or(ClientProblem::Unknown);
    }
    let url = check_document_id(env, client_id).map_err(ClientProblem::BadDocument)?;
    if let Some(cached) = store
        .call(
            vec![],
            GetClient {
                id: client_id.to_string(),
            },
        )
        .await?
    {
        if cached.fresh_until.is_some_and(|t| t > now) {
            return Ok(cached);
        }
    }
    let body = fetch_document(&url)
        .await
        .map_err(ClientProblem::BadDocument)?;
    let client = parse_document(client_id, &body, now).map_err(ClientProblem::BadDocument)?;
    store
        .call(
            vec![],
            PutDocumentClient {
                client: client.clone(),
            },
        )
        .await?;
    Ok(client)
}

/// Client credentials presented at the token or revocation endpoint.
pub struct Presented {
    pub client_id: String,
    pub secret: Option<String>,
    /// Whether they came in an `Authorization: Basic` header.
    pub basic: bool,
}

/// Reads client credentials: HTTP Basic (RFC 6749 §2.3.1) or `client_id` / `client_secret`
/// form parameters.
pub fn presented(
    req: &Request,
    form: &super::params::Params,
) -> std::result::Result<Presented, String> {
    let basic = req
        .headers()
        .get("authorization")
        .ok()
        .flatten()
        .and_then(|h| {
            let (scheme, value) = h.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("basic")
                .then(|| value.trim().to_string())
        });
    if let Some(encoded) = basic {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("the Basic authorization header is not valid base64")?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or("the Basic authorization header must be client_id:client_secret")?;
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("v={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let id = decode(id);
        if form.get("client_id").is_some_and(|f| f != id) {
            return Err("client_id differs from the one in the Authorization header".into());
        }
        return Ok(Presented {
            client_id: id,
            secret: Some(decode(secret)),
            basic: true,
        });
    }
    let client_id = form
        .get("client_id")
        .ok_or("client_id is required (or client credentials in an Authorization: Basic header)")?;
    Ok(Presented {
        client_id: client_id.to_string(),
        secret: form.get("client_secret").map(str::to_string),
        basic: false,
    })
}

/// Checks presented credentials against the client: public clients need none; confidential
/// ones must present their secret, compared by hash.
pub fn authenticate(client: &ClientRecord, presented: &Presented) -> bool {
    match (client.auth_method, &client.secret_hash) {
        (AuthMethod::None, _) => true,
        (_, Some(expected)) => presented.secret.as_deref().is_some_and(|s| {
            mac::same(
                mac::sha256_hex(s.as_bytes()).as_bytes(),
                expected.as_bytes(),
            )
        }),
        (_, None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_follow_the_rules() {
        assert!(check_redirect_uri("https://claude.ai/api/mcp/auth_callback").is_ok());
        assert!(check_redirect_uri("http://127.0.0.1:33418/callback").is_ok());
        assert!(check_redirect_uri("http://localhost:6274/oauth/callback").is_ok());
        assert!(check_redirect_uri("cursor://anysphere.cursor-mcp/oauth/callback").is_ok());
        assert!(check_redirect_uri("http://evil.example/cb").is_err());
        assert!(check_redirect_uri("javascript:alert(1)").is_err());
        assert!(check_redirect_uri("data:text/html,hi").is_err());
        assert!(check_redirect_uri("https://a.example/cb#frag").is_err());
        assert!(check_redirect_uri("https://user:pw@a.example/cb").is_err());
        assert!(check_redirect_uri("/relative").is_err());
    }

    #[test]
    fn documents_must_name_themselves_and_be_public() {
        let id = "https://app.example/client.json";
        let ok = br#"{"client_id":"https://app.example/client.json","client_name":"App\u0007 X",
            "redirect_uris":["https://app.example/cb"],"grant_types":["authorization_code","refresh_token"]}"#;
        let client = parse_document(id, ok, 0).unwrap();
        assert_eq!(client.name, "App X");
        assert!(client.refresh);
        let other = br#"{"client_id":"https://evil.example/c.json","redirect_uris":["https://a.example/cb"]}"#;
        assert!(parse_document(id, other, 0).is_err());
        let secret = br#"{"client_id":"https://app.example/client.json","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}"#;
        assert!(parse_document(id, secret, 0).is_err());
        let bad_uri =
            br#"{"client_id":"https://app.example/client.json","redirect_uris":["javascript:x"]}"#;
        assert!(parse_document(id, bad_uri, 0).is_err());
    }

    #[test]
    fn labels_and_names() {
        assert_eq!(
            redirect_label("https://claude.ai/api/mcp/auth_callback"),
            "claude.ai"
        );
        assert_eq!(redirect_label("http://127.0.0.1:8080/cb"), "127.0.0.1:8080");
        assert_eq!(
            redirect_label("cursor://anysphere.cursor-mcp/oauth"),
            "the app that handles cursor: links"
        );
        assert_eq!(clean_name(" a\n\tb "), "a b");
        assert_eq!(clean_name(&"x".repeat(300)).len(), MAX_NAME_CHARS);
    }
}
