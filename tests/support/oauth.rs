//! An OAuth client for tests, written from the specs (RFC 6749, 7636, 7591, 8707, 9207): it
//! registers, opens the consent page like a browser (keeping cookies, never following
//! redirects), approves or denies with the owner passphrase, and exchanges codes and refresh
//! tokens. Also a client metadata document server and the GitHub sign-in stand-in.

use crate::mcp::{read, RawResponse};
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The owner passphrase of test instances.
pub const PASSPHRASE: &str = "test-owner-passphrase-0123";
/// The redirect URI test clients register (never fetched: tests read `Location`).
pub const REDIRECT_URI: &str = "https://client.example/callback";

/// `n` random bytes as unpadded base64url.
pub fn random(n: usize) -> String {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("urandom");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE pair: (verifier, S256 challenge).
pub fn pkce() -> (String, String) {
    let verifier = random(48);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// A client that never follows redirects.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// Cookies as a browser would keep them for one site.
#[derive(Default, Clone)]
pub struct Jar(BTreeMap<String, String>);

impl Jar {
    pub fn take(&mut self, response: &RawResponse) {
        for value in response.headers.get_all("set-cookie") {
            let Ok(text) = value.to_str() else { continue };
            let pair = text.split(';').next().unwrap_or("");
            if let Some((name, value)) = pair.split_once('=') {
                let removed = text.to_ascii_lowercase().contains("max-age=0");
                if value.is_empty() || removed {
                    self.0.remove(name.trim());
                } else {
                    self.0.insert(name.trim().to_string(), value.to_string());
                }
            }
        }
    }

    pub fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }
}

/// `POST /oauth/register` with `metadata`.
pub async fn register(base: &str, metadata: Value) -> RawResponse {
    read(
        http()
            .post(format!("{base}/oauth/register"))
            .json(&metadata)
            .send()
            .await
            .expect("register"),
    )
    .await
}

/// Registers a public client with refresh tokens; returns its id.
pub async fn register_public(base: &str, name: &str) -> String {
    let r = register(
        base,
        json!({
            "client_name": name,
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["client_id"]
        .as_str()
        .expect("client_id")
        .to_string()
}

/// A GET like a browser's, with the jar's cookies; keeps the cookies it sets.
pub async fn browse(url: &str, jar: &mut Jar) -> RawResponse {
    let r = read(
        http()
            .get(url)
            .header("cookie", jar.header())
            .send()
            .await
            .expect("GET"),
    )
    .await;
    jar.take(&r);
    r
}

/// The consent page as parsed from its HTML.
pub struct Consent {
    pub response: RawResponse,
    pub request: String,
    pub csrf: String,
}

/// The value of hidden input `name` in `html`.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_string())
}

/// Opens `/oauth/authorize` with `params`.
pub async fn authorize(base: &str, params: &[(&str, &str)], jar: &mut Jar) -> RawResponse {
    let query: String = url_encode(params);
    browse(&format!("{base}/oauth/authorize?{query}"), jar).await
}

pub fn url_encode(params: &[(&str, &str)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The standard authorization parameters for `client_id`.
pub fn auth_params<'a>(
    client_id: &'a str,
    challenge: &'a str,
    state: &'a str,
    resource: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT_URI),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", state),
        ("resource", resource),
        ("scope", "mcp"),
    ]
}

/// Opens the consent page and reads its form fields; panics unless it is one.
pub async fn consent(base: &str, params: &[(&str, &str)], jar: &mut Jar) -> Consent {
    let response = authorize(base, params, jar).await;
    assert_eq!(response.status, 200, "consent page: {}", response.body);
    let request = hidden(&response.body, "request").expect("request field");
    let csrf = hidden(&response.body, "csrf").expect("csrf field");
    Consent {
        response,
        request,
        csrf,
    }
}

/// Posts the consent form like the browser would (same origin).
pub async fn decide(base: &str, jar: &mut Jar, fields: &[(&str, &str)]) -> RawResponse {
    let r = read(
        http()
            .post(format!("{base}/oauth/consent"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", base)
            .header("cookie", jar.header())
            .body(url_encode(fields))
            .send()
            .await
            .expect("POST consent"),
    )
    .await;
    jar.take(&r);
    r
}

/// Answers `consent` (`approve` or `deny`), with a passphrase when given.
pub async fn answer(
    base: &str,
    jar: &mut Jar,
    consent: &Consent,
    decision: &str,
    passphrase: Option<&str>,
) -> RawResponse {
    let mut fields = vec![
        ("request", consent.request.as_str()),
        ("csrf", consent.csrf.as_str()),
        ("decision", decision),
    ];
    if let Some(passphrase) = passphrase {
        fields.push(("passphrase", passphrase));
    }
    decide(base, jar, &fields).await
}

/// Approves `consent` with the passphrase; returns the redirect response.
pub async fn approve(base: &str, jar: &mut Jar, consent: &Consent) -> RawResponse {
    answer(base, jar, consent, "approve", Some(PASSPHRASE)).await
}

/// The query parameters of a redirect's `Location`.
pub fn location_params(response: &RawResponse) -> BTreeMap<String, String> {
    let location = response
        .header("location")
        .unwrap_or_else(|| panic!("no Location ({}): {}", response.status, response.body));
    let query = location.split_once('?').map(|(_, q)| q).unwrap_or("");
    query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `POST /oauth/token` (or another form endpoint) with `form`.
pub async fn post_form(base: &str, path: &str, form: &[(&str, &str)]) -> RawResponse {
    read(
        http()
            .post(format!("{base}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(url_encode(form))
            .send()
            .await
            .expect("POST form"),
    )
    .await
}

/// Tokens from a successful token response.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access: String,
    pub refresh: Option<String>,
    pub expires_in: i64,
}

impl Tokens {
    pub fn from(response: &RawResponse) -> Tokens {
        assert_eq!(response.status, 200, "token response: {}", response.body);
        let v = response.json();
        assert_eq!(v["token_type"], "Bearer");
        Tokens {
            access: v["access_token"]
                .as_str()
                .expect("access_token")
                .to_string(),
            refresh: v["refresh_token"].as_str().map(str::to_string),
            expires_in: v["expires_in"].as_i64().expect("expires_in"),
        }
    }
}

/// An authorization in progress: the client's PKCE verifier and state, the browser's cookies
/// and the consent page it shows.
pub struct Flow {
    pub verifier: String,
    pub state: String,
    pub resource: String,
    pub jar: Jar,
    pub page: Consent,
}

/// Starts authorizing `client_id` with the standard parameters, up to the consent page.
pub async fn begin(base: &str, client_id: &str) -> Flow {
    let (verifier, challenge) = pkce();
    let state = random(16);
    let resource = format!("{base}/mcp");
    let mut jar = Jar::default();
    let page = consent(
        base,
        &auth_params(client_id, &challenge, &state, &resource),
        &mut jar,
    )
    .await;
    Flow {
        verifier,
        state,
        resource,
        jar,
        page,
    }
}

/// Authorizes `client_id` with the passphrase; returns (code, PKCE verifier).
pub async fn code_for(base: &str, client_id: &str) -> (String, String) {
    let mut flow = begin(base, client_id).await;
    let back = approve(base, &mut flow.jar, &flow.page).await;
    assert_eq!(back.status, 302, "{}", back.body);
    let params = location_params(&back);
    assert_eq!(params.get("state"), Some(&flow.state));
    (params.get("code").expect("code").clone(), flow.verifier)
}

/// The whole dance for a registered public client: authorize, approve, exchange.
pub async fn sign_in(base: &str, client_id: &str) -> Tokens {
    let (code, verifier) = code_for(base, client_id).await;
    let resource = format!("{base}/mcp");
    Tokens::from(
        &post_form(
            base,
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT_URI),
                ("client_id", client_id),
                ("code_verifier", &verifier),
                ("resource", &resource),
            ],
        )
        .await,
    )
}

/// The status of an MCP `initialize` with `token`.
pub async fn mcp_status(base: &str, token: &str) -> RawResponse {
    crate::mcp::send(
        &reqwest::Client::new(),
        &format!("{base}/mcp"),
        token,
        None,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "oauth-test", "version": "0"}}})
        .to_string(),
        &[],
    )
    .await
}

/// Serves JSON documents at paths the test chooses (client metadata documents).
#[derive(Clone, Default)]
pub struct DocumentServer {
    docs: Arc<Mutex<BTreeMap<String, Value>>>,
    pub port: u16,
}

impl DocumentServer {
    pub fn start() -> DocumentServer {
        let docs: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
        let shared = docs.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let docs = shared.clone();
            async move {
                let doc = docs.lock().ok().and_then(|d| d.get(uri.path()).cloned());
                match doc {
                    Some(doc) => (axum::http::StatusCode::OK, axum::Json(doc)),
                    None => (axum::http::StatusCode::NOT_FOUND, axum::Json(json!({}))),
                }
            }
        });
        let port = crate::serve_forever(app);
        DocumentServer { docs, port }
    }

    /// The URL `path` is served at.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn put(&self, path: &str, doc: Value) {
        self.docs
            .lock()
            .expect("docs")
            .insert(path.to_string(), doc);
    }
}

/// A stand-in for GitHub's OAuth App endpoints: `/login/oauth/authorize` signs in whoever the
/// `login` query parameter names (a browser would pick the account on GitHub's page),
/// `/login/oauth/access_token` exchanges the code, `/user` says who it is.
pub struct GithubStandIn {
    pub port: u16,
}

pub const GITHUB_CLIENT_ID: &str = "Iv1.standin";
pub const GITHUB_CLIENT_SECRET: &str = "standin-secret-0123456789";

impl GithubStandIn {
    pub fn start() -> GithubStandIn {
        use axum::extract::{Form, Query};
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::{IntoResponse, Redirect};
        use axum::routing::{get, post};
        let app = axum::Router::new()
            .route(
                "/login/oauth/authorize",
                get(|Query(q): Query<BTreeMap<String, String>>| async move {
                    if q.get("client_id").map(String::as_str) != Some(GITHUB_CLIENT_ID) {
                        return (StatusCode::BAD_REQUEST, "unknown client").into_response();
                    }
                    let login = q.get("login").cloned().unwrap_or_default();
                    let redirect = q.get("redirect_uri").cloned().unwrap_or_default();
                    let state = q.get("state").cloned().unwrap_or_default();
                    Redirect::to(&format!(
                        "{redirect}?code=code-{login}&state={}",
                        enc(&state)
                    ))
                    .into_response()
                }),
            )
            .route(
                "/login/oauth/access_token",
                post(|Form(f): Form<BTreeMap<String, String>>| async move {
                    let ok = f.get("client_id").map(String::as_str) == Some(GITHUB_CLIENT_ID)
                        && f.get("client_secret").map(String::as_str) == Some(GITHUB_CLIENT_SECRET);
                    let login = f
                        .get("code")
                        .and_then(|c| c.strip_prefix("code-"))
                        .unwrap_or("");
                    if !ok || login.is_empty() {
                        return axum::Json(json!({"error": "bad_verification_code"}));
                    }
                    axum::Json(
                        json!({"access_token": format!("gho_{login}"), "token_type": "bearer"}),
                    )
                }),
            )
            .route(
                "/user",
                get(|headers: HeaderMap| async move {
                    let login = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Bearer gho_"))
                        .map(str::to_string);
                    match login {
                        Some(login) => (StatusCode::OK, axum::Json(json!({"login": login}))),
                        None => (
                            StatusCode::UNAUTHORIZED,
                            axum::Json(json!({"message": "Bad credentials"})),
                        ),
                    }
                }),
            );
        GithubStandIn {
            port: crate::serve_forever(app),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A browser in which the owner signed in with the passphrase (its cookies).
pub async fn owner_browser(base: &str) -> Jar {
    let mut jar = Jar::default();
    let form = browse(&format!("{base}/oauth/signin?next=/"), &mut jar).await;
    let csrf = hidden(&form.body, "csrf").expect("the sign-in form has a csrf field");
    let signed = read(
        http()
            .post(format!("{base}/oauth/signin"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", base)
            .header("cookie", jar.header())
            .body(url_encode(&[
                ("next", "/"),
                ("csrf", csrf.as_str()),
                ("passphrase", PASSPHRASE),
            ]))
            .send()
            .await
            .expect("sign in"),
    )
    .await;
    assert!(matches!(signed.status, 302 | 303), "{}", signed.body);
    jar.take(&signed);
    jar
}
