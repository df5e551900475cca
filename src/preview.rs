//! `/preview/<token>/<path>`: a sandbox port published over HTTP. The unguessable signed token
//! names the sandbox and port and carries an expiry; the request (method, headers, streamed
//! body) goes through the sandbox's object to the daemon and the response streams back.

use crate::error::{ErrorKind, Result};
use crate::http;
use crate::links;
use crate::sandbox::SandboxClient;
use worker::{Env, Request, RequestInit, Response};

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let rest = path.trim_start_matches("/preview/");
    let (token, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let (sandbox_id, port) = match links::verify_preview_token(env, token) {
        Ok(grant) => grant,
        Err(e) => {
            let status = if e.kind == ErrorKind::NotConfigured {
                503
            } else {
                403
            };
            return Ok(http::json(status, &serde_json::json!({"error": e.message})));
        }
    };
    let query = req
        .url()?
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let mut init = RequestInit::new();
    init.with_method(req.method())
        .with_headers(req.headers().clone());
    if let Some(body) = req.inner().body() {
        init.with_body(Some(body.into()));
    }
    let inner = Request::new_with_init(
        &format!("https://sandbox/preview/{port}/{tail}{query}"),
        &init,
    )?;
    let mut response = SandboxClient::get(env, &sandbox_id)?.preview(inner).await?;
    let headers = response.headers_mut();
    let _ = headers.set("referrer-policy", "no-referrer");
    let _ = headers.set("x-robots-tag", "noindex");
    Ok(response)
}
