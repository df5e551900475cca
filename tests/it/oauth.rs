//! OAuth 2.1 on the MCP endpoint, driven as a client and a browser would: discovery from the 401,
//! registration (DCR and client metadata documents), authorization with PKCE, consent with the
//! owner passphrase or GitHub, token exchange, `/mcp` with the token, refresh rotation and reuse
//! detection, revocation, expiry, rate limits, and the official MCP TypeScript SDK's client.

use crate::base;
use handoff_tests::mcp::read;
use handoff_tests::oauth::{
    self, answer, approve, auth_params, code_for, consent, decide, location_params, mcp_status,
    pkce, post_form, random, register, register_public, sign_in, DocumentServer, GithubStandIn,
    Jar, Tokens, PASSPHRASE, REDIRECT_URI,
};
use handoff_tests::worker::{self, stop_group_at_exit};
use handoff_tests::{Mcp, Worker, WorkerOptions, TOKEN};
use serde_json::json;
use std::sync::OnceLock;
use std::time::Duration;

/// An instance with a 3-second access-token lifetime, GitHub sign-in through the stand-in, and
/// without the development switch for loopback client ids.
fn edge() -> &'static (GithubStandIn, Worker) {
    static EDGE: OnceLock<(GithubStandIn, Worker)> = OnceLock::new();
    EDGE.get_or_init(|| {
        let github = GithubStandIn::start();
        let worker = Worker::start(
            WorkerOptions::default()
                .var("OAUTH_ACCESS_TOKEN_TTL_SECONDS", "3")
                .var("GITHUB_OAUTH_CLIENT_ID", oauth::GITHUB_CLIENT_ID)
                .var("GITHUB_OAUTH_CLIENT_SECRET", oauth::GITHUB_CLIENT_SECRET)
                .var("HANDOFF_OWNER_GITHUB_LOGINS", "octo-owner, @Second")
                .var("GITHUB_OAUTH_URL", github.url())
                .var("GITHUB_OAUTH_API_URL", github.url()),
        );
        stop_group_at_exit(&worker);
        (github, worker)
    })
}

async fn token_request(base: &str, form: &[(&str, &str)]) -> handoff_tests::RawResponse {
    post_form(base, "/oauth/token", form).await
}

fn oauth_error(r: &handoff_tests::RawResponse) -> String {
    r.json()["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn discovery_starts_from_the_401() {
    let base = base();
    let unauthenticated = mcp_status(&base, "").await;
    assert_eq!(unauthenticated.status, 401);
    let challenge = unauthenticated
        .header("www-authenticate")
        .expect("challenge");
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\""))
            && challenge.contains("scope=\"mcp\""),
        "{challenge}"
    );
    for url in [
        metadata_url.clone(),
        format!("{base}/.well-known/oauth-protected-resource"),
    ] {
        let prm = read(reqwest::get(&url).await.unwrap()).await;
        assert_eq!(prm.status, 200, "{url}");
        let prm = prm.json();
        assert_eq!(prm["resource"], format!("{base}/mcp"));
        assert_eq!(prm["authorization_servers"], json!([base]));
        assert_eq!(prm["scopes_supported"], json!(["mcp"]));
    }
    let r = read(
        reqwest::get(format!("{base}/.well-known/oauth-authorization-server"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    let meta = r.json();
    assert_eq!(meta["issuer"], base);
    assert_eq!(
        meta["authorization_endpoint"],
        format!("{base}/oauth/authorize")
    );
    assert_eq!(meta["token_endpoint"], format!("{base}/oauth/token"));
    assert_eq!(
        meta["registration_endpoint"],
        format!("{base}/oauth/register")
    );
    assert_eq!(meta["revocation_endpoint"], format!("{base}/oauth/revoke"));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["client_id_metadata_document_supported"], json!(true));
    assert_eq!(
        meta["authorization_response_iss_parameter_supported"],
        json!(true)
    );
    assert_eq!(
        meta["grant_types_supported"],
        json!(["authorization_code", "refresh_token"])
    );
}

#[tokio::test]
async fn a_registered_client_signs_in_uses_mcp_and_rotates_refresh_tokens() {
    let base = base();
    let client_id = register_public(&base, "Phone <Assistant>").await;
    let oauth::Flow {
        verifier,
        state,
        resource,
        mut jar,
        page,
    } = oauth::begin(&base, &client_id).await;
    let html = &page.response.body;
    assert!(
        html.contains("Phone &lt;Assistant&gt;"),
        "names the client, escaped: {html}"
    );
    assert!(
        html.contains("client.example"),
        "names the redirect host: {html}"
    );
    assert!(html.contains("viewport"), "works on a phone");
    assert_eq!(
        page.response.header("x-frame-options").as_deref(),
        Some("DENY")
    );
    assert!(page
        .response
        .header("content-security-policy")
        .unwrap_or_default()
        .contains("frame-ancestors 'none'"));

    let back = approve(&base, &mut jar, &page).await;
    assert_eq!(back.status, 302, "{}", back.body);
    assert!(back.header("location").unwrap().starts_with(REDIRECT_URI));
    let params = location_params(&back);
    assert_eq!(params.get("state"), Some(&state));
    assert_eq!(params.get("iss"), Some(&base), "RFC 9207 iss");
    let code = params["code"].clone();

    let exchanged = token_request(
        &base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", &client_id),
            ("code_verifier", &verifier),
            ("resource", &resource),
        ],
    )
    .await;
    assert_eq!(
        exchanged.header("cache-control").as_deref(),
        Some("no-store")
    );
    let first = Tokens::from(&exchanged);
    assert_eq!(first.expires_in, 3600);
    assert_eq!(exchanged.json()["scope"], "mcp");

    // The access token works on /mcp, for real tool calls.
    let mcp = Mcp::connect_as(&base, &first.access, "2025-11-25").await;
    let runs = mcp.call_ok("opencode_list_runs", json!({"limit": 1})).await;
    assert!(runs.is_object(), "{runs}");
    // Static API tokens keep working beside OAuth.
    assert_eq!(mcp_status(&base, TOKEN).await.status, 200);

    // Rotation: a refresh gives a new pair; the old refresh token is spent.
    let refresh_with = |token: String| {
        let (base, client_id) = (base.clone(), client_id.clone());
        async move {
            token_request(
                &base,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", &token),
                    ("client_id", &client_id),
                ],
            )
            .await
        }
    };
    let first_refresh = first.refresh.clone().expect("a refresh token");
    let second = Tokens::from(&refresh_with(first_refresh.clone()).await);
    assert_ne!(second.access, first.access);
    assert_ne!(second.refresh, first.refresh);
    assert_eq!(mcp_status(&base, &second.access).await.status, 200);

    // Reusing the spent refresh token revokes the whole family.
    let reused = refresh_with(first_refresh).await;
    assert_eq!(reused.status, 400, "{}", reused.body);
    assert_eq!(oauth_error(&reused), "invalid_grant");
    assert!(reused.body.contains("already used"), "{}", reused.body);
    let after = mcp_status(&base, &second.access).await;
    assert_eq!(
        after.status, 401,
        "the family's access token is revoked too"
    );
    assert!(after
        .header("www-authenticate")
        .unwrap_or_default()
        .contains("invalid_token"));
    let next = refresh_with(second.refresh.clone().unwrap()).await;
    assert_eq!(oauth_error(&next), "invalid_grant");
}

#[tokio::test]
async fn revocation_ends_access_and_refresh_tokens() {
    let base = base();
    let client_id = register_public(&base, "Revoker").await;
    let tokens = sign_in(&base, &client_id).await;
    assert_eq!(mcp_status(&base, &tokens.access).await.status, 200);

    let revoked = post_form(
        &base,
        "/oauth/revoke",
        &[("token", &tokens.access), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(mcp_status(&base, &tokens.access).await.status, 401);

    // The refresh token survives an access-token revocation…
    let refresh = tokens.refresh.clone().unwrap();
    let renewed = Tokens::from(
        &token_request(
            &base,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client_id),
            ],
        )
        .await,
    );
    assert_eq!(mcp_status(&base, &renewed.access).await.status, 200);
    // …and revoking a refresh token ends the whole authorization.
    let new_refresh = renewed.refresh.clone().unwrap();
    post_form(
        &base,
        "/oauth/revoke",
        &[
            ("token", &new_refresh),
            ("token_type_hint", "refresh_token"),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(mcp_status(&base, &renewed.access).await.status, 401);
    let refused = token_request(
        &base,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &new_refresh),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(oauth_error(&refused), "invalid_grant");
    // Unknown tokens revoke quietly (RFC 7009).
    let unknown = post_form(
        &base,
        "/oauth/revoke",
        &[("token", "hnd_at_nothing"), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(unknown.status, 200);
}

#[tokio::test]
async fn a_client_metadata_document_is_fetched_checked_and_used() {
    let base = base();
    let docs = DocumentServer::start();
    let client_id = docs.url("/good/client.json");
    docs.put(
        "/good/client.json",
        json!({
            "client_id": client_id,
            "client_name": "Metadata Client",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        }),
    );
    let oauth::Flow {
        verifier,
        state,
        resource,
        mut jar,
        page,
    } = oauth::begin(&base, &client_id).await;
    assert!(page.response.body.contains("Metadata Client"));
    assert!(page.response.body.contains("published at"));
    let code = location_params(&approve(&base, &mut jar, &page).await)["code"].clone();
    let tokens = Tokens::from(
        &token_request(
            &base,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT_URI),
                ("client_id", &client_id),
                ("code_verifier", &verifier),
            ],
        )
        .await,
    );
    assert!(tokens.refresh.is_some());
    assert_eq!(mcp_status(&base, &tokens.access).await.status, 200);

    // A document that names another client id, a missing one, and one with a bad redirect URI
    // are refused at the authorization endpoint, without redirecting anywhere.
    let liar = docs.url("/liar/client.json");
    docs.put(
        "/liar/client.json",
        json!({"client_id": "https://claude.ai/client.json", "redirect_uris": [REDIRECT_URI]}),
    );
    let evil = docs.url("/evil/client.json");
    docs.put(
        "/evil/client.json",
        json!({"client_id": evil, "redirect_uris": ["javascript:alert(1)"]}),
    );
    for (id, says) in [
        (liar.as_str(), "is not the URL it was fetched from"),
        (docs.url("/missing.json").as_str(), "HTTP 404"),
        (evil.as_str(), "javascript"),
    ] {
        let mut jar = Jar::default();
        let r = oauth::authorize(
            &base,
            &auth_params(id, &pkce().1, &state, &resource),
            &mut jar,
        )
        .await;
        assert_eq!(r.status, 400, "{id}: {}", r.body);
        assert!(r.header("location").is_none());
        assert!(r.body.contains(says), "{id}: {}", r.body);
    }
}

#[tokio::test]
async fn the_authorization_endpoint_refuses_bad_requests() {
    let base = base();
    let client_id = register_public(&base, "Refusals").await;
    let (_, challenge) = pkce();
    let resource = format!("{base}/mcp");
    let good = auth_params(&client_id, &challenge, "st", &resource);
    let with = |key: &str, value: Option<&'static str>| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = good
            .iter()
            .filter(|(k, _)| *k != key)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(v) = value {
            out.push((key.to_string(), v.to_string()));
        }
        out
    };
    let open = |params: Vec<(String, String)>| {
        let base = base.clone();
        async move {
            let refs: Vec<(&str, &str)> = params
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            oauth::authorize(&base, &refs, &mut Jar::default()).await
        }
    };

    // Problems with the client or the redirect URI: an error page, never a redirect.
    let unknown = open(with("client_id", Some("cli_00000000000000000000000000"))).await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.body.contains("invalid_client") && unknown.body.contains("register again"));
    assert!(unknown.header("location").is_none());
    for uri in [
        "https://evil.example/callback",
        "https://client.example/callback/",
        "https://client.example/callback?x=1",
    ] {
        let r = open(with("redirect_uri", Some(uri))).await;
        assert_eq!(r.status, 400, "{uri}");
        assert!(r.header("location").is_none(), "{uri}");
        assert!(r.body.contains("not one that"), "{}", r.body);
    }

    // Everything else goes back to the registered redirect URI with an error.
    for (params, error, state_back) in [
        (with("state", None), "invalid_request", false),
        (with("code_challenge", None), "invalid_request", true),
        (
            with("code_challenge_method", Some("plain")),
            "invalid_request",
            true,
        ),
        (with("code_challenge_method", None), "invalid_request", true),
        (
            with("code_challenge", Some("short")),
            "invalid_request",
            true,
        ),
        (
            with("response_type", Some("token")),
            "unsupported_response_type",
            true,
        ),
        (
            with("resource", Some("https://other.example/mcp")),
            "invalid_target",
            true,
        ),
    ] {
        let r = open(params.clone()).await;
        assert_eq!(r.status, 302, "{params:?}: {}", r.body);
        assert!(r.header("location").unwrap().starts_with(REDIRECT_URI));
        let back = location_params(&r);
        assert_eq!(
            back.get("error").map(String::as_str),
            Some(error),
            "{params:?}"
        );
        assert!(back.contains_key("error_description"));
        assert_eq!(back.get("iss"), Some(&base));
        assert_eq!(back.contains_key("state"), state_back, "{params:?}");
    }
    let repeated = oauth::authorize(
        &base,
        &[good.as_slice(), &[("state", "again")]].concat(),
        &mut Jar::default(),
    )
    .await;
    assert_eq!(repeated.status, 400);
    assert!(repeated.body.contains("repeated"));
}

#[tokio::test]
async fn the_token_endpoint_refuses_what_does_not_match() {
    let base = base();
    let client_id = register_public(&base, "Token refusals").await;
    let other_client = register_public(&base, "Someone else").await;

    // Wrong verifier: refused, and the code is spent.
    let (code, verifier) = code_for(&base, &client_id).await;
    let exchange = |code: String, verifier: String, extra: Vec<(&'static str, String)>| {
        let base = base.clone();
        let client_id = client_id.clone();
        async move {
            let mut form = vec![
                ("grant_type", "authorization_code".to_string()),
                ("code", code),
                ("redirect_uri", REDIRECT_URI.to_string()),
                ("client_id", client_id),
                ("code_verifier", verifier),
            ];
            for (k, v) in extra {
                form.retain(|(key, _)| *key != k);
                if !v.is_empty() {
                    form.push((k, v));
                }
            }
            let refs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token_request(&base, &refs).await
        }
    };
    let wrong = exchange(code.clone(), random(48), vec![]).await;
    assert_eq!(oauth_error(&wrong), "invalid_grant", "{}", wrong.body);
    assert!(wrong.body.contains("code_verifier"));
    let late = exchange(code, verifier, vec![]).await;
    assert_eq!(oauth_error(&late), "invalid_grant");

    // Redirect URI, resource and client must match the authorization.
    let (code, verifier) = code_for(&base, &client_id).await;
    for (field, value, error) in [
        (
            "redirect_uri",
            "https://client.example/other".to_string(),
            "invalid_grant",
        ),
        (
            "resource",
            "https://other.example/mcp".to_string(),
            "invalid_target",
        ),
        // Last: a code presented by another client is spent.
        ("client_id", other_client.clone(), "invalid_grant"),
    ] {
        let r = exchange(code.clone(), verifier.clone(), vec![(field, value)]).await;
        assert_eq!(oauth_error(&r), error, "{field}: {}", r.body);
    }

    // Using a code twice revokes what the first use issued.
    let (code, verifier) = code_for(&base, &client_id).await;
    let first = Tokens::from(&exchange(code.clone(), verifier.clone(), vec![]).await);
    assert_eq!(mcp_status(&base, &first.access).await.status, 200);
    let again = exchange(code, verifier, vec![]).await;
    assert_eq!(oauth_error(&again), "invalid_grant");
    assert_eq!(mcp_status(&base, &first.access).await.status, 401);

    // Unknown clients are told to register again (Claude does so on invalid_client).
    let (code, verifier) = code_for(&base, &client_id).await;
    let unknown = exchange(
        code,
        verifier,
        vec![("client_id", "cli_00000000000000000000000000".into())],
    )
    .await;
    assert_eq!(unknown.status, 401);
    assert_eq!(oauth_error(&unknown), "invalid_client");
    let bad_grant = token_request(
        &base,
        &[("grant_type", "password"), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(oauth_error(&bad_grant), "unsupported_grant_type");
    let json_body = read(
        oauth::http()
            .post(format!("{base}/oauth/token"))
            .json(&json!({"grant_type": "authorization_code"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(json_body.status, 400);
    assert_eq!(oauth_error(&json_body), "invalid_request");

    // Confidential clients must present their secret (form or Basic).
    let registered = register(
        &base,
        json!({"client_name": "Server app", "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code"]}),
    )
    .await
    .json();
    assert_eq!(
        registered["token_endpoint_auth_method"],
        "client_secret_basic"
    );
    let secret_client = registered["client_id"].as_str().unwrap().to_string();
    let secret = registered["client_secret"]
        .as_str()
        .expect("a secret")
        .to_string();
    let (code, verifier) = code_for(&base, &secret_client).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT_URI),
        ("code_verifier", verifier.as_str()),
    ];
    let no_secret = token_request(
        &base,
        &[&form[..], &[("client_id", &secret_client)]].concat(),
    )
    .await;
    assert_eq!(no_secret.status, 401);
    let basic = |secret: &str| {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{secret_client}:{secret}"))
        )
    };
    let send_basic = |auth: String| {
        let base = base.clone();
        let form: Vec<(String, String)> = form
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        async move {
            let refs: Vec<(&str, &str)> =
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            read(
                oauth::http()
                    .post(format!("{base}/oauth/token"))
                    .header("authorization", auth)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(oauth::url_encode(&refs))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let wrong_secret = send_basic(basic("nope")).await;
    assert_eq!(wrong_secret.status, 401);
    assert!(wrong_secret
        .header("www-authenticate")
        .unwrap_or_default()
        .starts_with("Basic"));
    let ok = Tokens::from(&send_basic(basic(&secret)).await);
    assert!(
        ok.refresh.is_none(),
        "no refresh token for a client that did not register for it"
    );
    assert_eq!(mcp_status(&base, &ok.access).await.status, 200);
}

#[tokio::test]
async fn tokens_are_bound_to_this_deployments_mcp_url() {
    let base = base();
    let client_id = register_public(&base, "Audience").await;
    let tokens = sign_in(&base, &client_id).await;
    assert_eq!(mcp_status(&base, &tokens.access).await.status, 200);
    // The same server reached under another name is another resource: the token was issued for
    // http://127.0.0.1:<port>/mcp, not http://localhost:<port>/mcp.
    let port = worker::shared().port;
    let r = read(
        reqwest::Client::new()
            .post(format!("{base}/mcp"))
            .header("host", format!("localhost:{port}"))
            .header("authorization", format!("Bearer {}", tokens.access))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r
        .header("www-authenticate")
        .unwrap_or_default()
        .contains(&format!("http://localhost:{port}/.well-known/")));
}

#[tokio::test]
async fn consent_needs_the_owner_and_resists_forgery() {
    let base = base();
    let client_id = register_public(&base, "Consent checks").await;
    let (_, challenge) = pkce();
    let resource = format!("{base}/mcp");
    let mut jar = Jar::default();
    let page = consent(
        &base,
        &auth_params(&client_id, &challenge, "s1", &resource),
        &mut jar,
    )
    .await;
    assert!(
        page.response.body.contains("type=\"password\""),
        "asks for the passphrase"
    );

    let wrong = answer(&base, &mut jar, &page, "approve", Some("guess")).await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("Wrong passphrase") && wrong.header("location").is_none());

    // Forged posts: no CSRF cookie, a different CSRF value, another site's Origin.
    let mut no_cookie = Jar::default();
    let forged = decide(
        &base,
        &mut no_cookie,
        &[
            ("request", &page.request),
            ("csrf", &page.csrf),
            ("decision", "approve"),
            ("passphrase", PASSPHRASE),
        ],
    )
    .await;
    assert_eq!(forged.status, 403);
    let other_csrf = decide(
        &base,
        &mut jar.clone(),
        &[
            ("request", &page.request),
            ("csrf", "x".repeat(43).as_str()),
            ("decision", "approve"),
            ("passphrase", PASSPHRASE),
        ],
    )
    .await;
    assert_eq!(other_csrf.status, 403);
    let cross_site = read(
        oauth::http()
            .post(format!("{base}/oauth/consent"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", "https://evil.example")
            .header("cookie", jar.header())
            .body(oauth::url_encode(&[
                ("request", &page.request),
                ("csrf", &page.csrf),
                ("decision", "approve"),
                ("passphrase", PASSPHRASE),
            ]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(cross_site.status, 403);

    // Deny sends the client access_denied with its state.
    let denied = answer(&base, &mut jar, &page, "deny", None).await;
    assert_eq!(denied.status, 302);
    let back = location_params(&denied);
    assert_eq!(back.get("error").map(String::as_str), Some("access_denied"));
    assert_eq!(back.get("state").map(String::as_str), Some("s1"));
    // The request is answered: it cannot be approved afterwards.
    let late = approve(&base, &mut jar, &page).await;
    assert_eq!(late.status, 404);

    // After one passphrase sign-in the browser stays signed in: the next consent needs a click.
    let page = consent(
        &base,
        &auth_params(&client_id, &challenge, "s2", &resource),
        &mut jar,
    )
    .await;
    let approved = approve(&base, &mut jar, &page).await;
    assert_eq!(approved.status, 302);
    assert!(approved
        .header("set-cookie")
        .unwrap_or_default()
        .contains("HttpOnly"));
    let page = consent(
        &base,
        &auth_params(&client_id, &challenge, "s3", &resource),
        &mut jar,
    )
    .await;
    assert!(page
        .response
        .body
        .contains("Signed in as the owner (passphrase)"));
    assert!(!page.response.body.contains("type=\"password\""));
    let clicked = answer(&base, &mut jar, &page, "approve", None).await;
    assert_eq!(clicked.status, 302, "{}", clicked.body);
    assert!(location_params(&clicked).contains_key("code"));
}

#[tokio::test]
async fn registration_checks_client_metadata() {
    let base = base();
    for (metadata, error) in [
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["http://evil.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"client_name": "no uris"}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": "https://a.example/cb"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT_URI], "grant_types": ["password"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT_URI], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "private_key_jwt"}),
            "invalid_client_metadata",
        ),
        (json!([1, 2]), "invalid_client_metadata"),
    ] {
        let r = register(&base, metadata.clone()).await;
        assert_eq!(r.status, 400, "{metadata}: {}", r.body);
        assert_eq!(oauth_error(&r), error, "{metadata}");
        assert!(r.json()["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty()));
    }
    let not_json = read(
        oauth::http()
            .post(format!("{base}/oauth/register"))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(oauth_error(&not_json), "invalid_client_metadata");
    let huge = register(
        &base,
        json!({"redirect_uris": [REDIRECT_URI], "client_name": "x".repeat(20_000)}),
    )
    .await;
    assert_eq!(huge.status, 413);
    let apps = register(
        &base,
        json!({"client_name": "Native", "token_endpoint_auth_method": "none",
            "redirect_uris": ["http://127.0.0.1:33418/callback", "cursor://anysphere.cursor-mcp/oauth/callback"]}),
    )
    .await;
    assert_eq!(apps.status, 201, "{}", apps.body);
    assert!(
        apps.json().get("client_secret").is_none(),
        "public clients get no secret"
    );
}

#[tokio::test]
async fn access_tokens_expire_and_refresh_tokens_renew_them() {
    let (_, worker) = edge();
    let base = worker.url("");
    let client_id = register_public(&base, "Short lived").await;
    let tokens = sign_in(&base, &client_id).await;
    assert_eq!(tokens.expires_in, 3);
    assert_eq!(mcp_status(&base, &tokens.access).await.status, 200);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let expired = mcp_status(&base, &tokens.access).await;
    assert_eq!(expired.status, 401);
    assert!(expired
        .header("www-authenticate")
        .unwrap_or_default()
        .contains("invalid_token"));
    let renewed = Tokens::from(
        &token_request(
            &base,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", tokens.refresh.as_deref().unwrap()),
                ("client_id", &client_id),
            ],
        )
        .await,
    );
    assert_eq!(mcp_status(&base, &renewed.access).await.status, 200);
}

#[tokio::test]
async fn the_owner_can_sign_in_with_github_when_listed() {
    let (_, worker) = edge();
    let base = worker.url("");
    let client_id = register_public(&base, "GitHub signed").await;
    let (_, challenge) = pkce();
    let resource = format!("{base}/mcp");

    for (login, allowed) in [("octo-owner", true), ("second", true), ("mallory", false)] {
        let mut jar = Jar::default();
        let page = consent(
            &base,
            &auth_params(&client_id, &challenge, "gh", &resource),
            &mut jar,
        )
        .await;
        assert!(page.response.body.contains("Sign in with GitHub"));
        let start = oauth::browse(
            &format!("{base}/oauth/github?request={}", page.request),
            &mut jar,
        )
        .await;
        assert_eq!(start.status, 302, "{}", start.body);
        let to_github = start.header("location").unwrap();
        assert!(
            to_github.contains("/login/oauth/authorize?client_id="),
            "{to_github}"
        );
        // The person picks their account on GitHub; GitHub sends the browser back.
        let github =
            oauth::browse(&format!("{to_github}&login={login}"), &mut Jar::default()).await;
        let callback = github.header("location").expect("GitHub redirects back");
        let back = oauth::browse(&callback, &mut jar).await;
        if !allowed {
            assert_eq!(back.status, 403, "{}", back.body);
            assert!(
                back.body.contains("mallory") && back.body.contains("HANDOFF_OWNER_GITHUB_LOGINS")
            );
            continue;
        }
        assert_eq!(back.status, 302, "{login}: {}", back.body);
        let consent_again = oauth::browse(
            &format!("{base}{}", back.header("location").unwrap()),
            &mut jar,
        )
        .await;
        assert!(
            consent_again
                .body
                .contains(&format!("Signed in as the owner (github:{login})")),
            "{}",
            consent_again.body
        );
        let csrf = oauth::hidden(&consent_again.body, "csrf").unwrap();
        let approved = decide(
            &base,
            &mut jar,
            &[
                ("request", &page.request),
                ("csrf", &csrf),
                ("decision", "approve"),
            ],
        )
        .await;
        assert_eq!(approved.status, 302);
        assert!(location_params(&approved).contains_key("code"));
    }

    // A callback that did not start in this browser (no nonce cookie) is refused.
    let mut jar = Jar::default();
    let page = consent(
        &base,
        &auth_params(&client_id, &challenge, "gh2", &resource),
        &mut jar,
    )
    .await;
    let start = oauth::browse(
        &format!("{base}/oauth/github?request={}", page.request),
        &mut jar,
    )
    .await;
    let github = oauth::browse(
        &format!("{}&login=octo-owner", start.header("location").unwrap()),
        &mut Jar::default(),
    )
    .await;
    let mut stranger = Jar::default();
    let refused = oauth::browse(&github.header("location").unwrap(), &mut stranger).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
}

#[tokio::test]
async fn loopback_client_ids_need_the_development_switch() {
    let (_, worker) = edge();
    let base = worker.url("");
    let docs = DocumentServer::start();
    let client_id = docs.url("/c.json");
    docs.put(
        "/c.json",
        json!({"client_id": client_id, "redirect_uris": [REDIRECT_URI]}),
    );
    let (_, challenge) = pkce();
    let r = oauth::authorize(
        &base,
        &auth_params(&client_id, &challenge, "s", &format!("{base}/mcp")),
        &mut Jar::default(),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("must use https"), "{}", r.body);
}

#[tokio::test]
async fn abuse_gets_clear_429s() {
    let worker = Worker::start(WorkerOptions::default().var(
        "HANDOFF_RATE_LIMITS",
        "register=2/3600,token=3/3600,signin=2/3600",
    ));
    let base = worker.url("");
    let client_id = register_public(&base, "Limited A").await;
    register_public(&base, "Limited B").await;
    let third = register(&base, json!({"redirect_uris": [REDIRECT_URI]})).await;
    assert_eq!(third.status, 429, "{}", third.body);
    assert!(third
        .header("retry-after")
        .is_some_and(|s| s.parse::<u64>().unwrap_or(0) > 0));
    assert!(third.json()["error_description"]
        .as_str()
        .unwrap()
        .contains("client registrations"));

    // Two wrong passphrases, then even the right one waits.
    let (_, challenge) = pkce();
    let mut jar = Jar::default();
    let page = consent(
        &base,
        &auth_params(&client_id, &challenge, "s", &format!("{base}/mcp")),
        &mut jar,
    )
    .await;
    for _ in 0..2 {
        let wrong = answer(&base, &mut jar, &page, "approve", Some("guess")).await;
        assert_eq!(wrong.status, 401);
    }
    let blocked = approve(&base, &mut jar, &page).await;
    assert_eq!(blocked.status, 429, "{}", blocked.body);
    assert!(blocked.header("retry-after").is_some());
    assert!(blocked.body.contains("failed sign-ins"));

    let verifier = "a".repeat(43);
    let bogus = [
        ("grant_type", "authorization_code"),
        ("code", "nope"),
        ("code_verifier", verifier.as_str()),
        ("client_id", client_id.as_str()),
    ];
    for _ in 0..3 {
        let r = token_request(&base, &bogus).await;
        assert_eq!(oauth_error(&r), "invalid_grant");
    }
    let limited = token_request(&base, &bogus).await;
    assert_eq!(limited.status, 429);
    assert!(limited.header("retry-after").is_some());
}

#[tokio::test]
async fn the_typescript_sdk_client_connects_with_oauth() {
    let base = base();
    let seen = handoff_tests::mcp::node_script(
        "tests/js/oauth_client.mjs",
        &[("HANDOFF_URL", &base), ("HANDOFF_PASSPHRASE", PASSPHRASE)],
    )
    .await;
    assert_eq!(seen["needed_authorization"], true);
    assert_eq!(seen["iss"], base);
    assert!(seen["client_id"].as_str().unwrap().starts_with("cli_"));
    assert_eq!(seen["has_refresh_token"], true);
    assert!(seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "opencode_run_task"));
    assert_eq!(seen["list_runs_is_error"], false);
}
