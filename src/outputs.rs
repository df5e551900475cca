//! Downloads of worker output files: `GET /outputs/<runId>/<path>?token=…`, the token a signed
//! link bound to that one file (7 days). What a worker wrote is hostile content served on
//! handoff's origin, so it always comes as an attachment, never sniffed, under a CSP sandbox:
//! a browser never runs it as a page of handoff's.

use crate::artifacts;
use crate::error::{ErrorKind, Result};
use crate::http;
use crate::ids;
use crate::links;
use crate::workers::files::check_path;
use worker::{Env, Headers, Request, Response};

pub async fn handle(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    let rest = path.trim_start_matches("/outputs/");
    let Some((run_id, file)) = rest.split_once('/') else {
        return Ok(http::not_found(&path));
    };
    if !ids::is_valid(ids::RUN, run_id) || check_path(file).is_err() {
        return Ok(http::not_found(&path));
    }
    let url = req.url()?;
    let token = url
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if let Err(e) = links::verify_output_token(env, run_id, file, &token) {
        let status = if e.kind == ErrorKind::NotConfigured {
            503
        } else {
            404
        };
        return Ok(http::json(
            status,
            &serde_json::json!({"error": "invalid_link", "message": e.message}),
        ));
    }
    let object = env
        .bucket(artifacts::BUCKET)?
        .get(artifacts::output_key(run_id, file))
        .execute()
        .await?;
    let Some(object) = object else {
        return Ok(http::not_found(&path));
    };
    let media_type = object
        .http_metadata()
        .content_type
        .unwrap_or_else(|| "application/octet-stream".into());
    let bytes = match object.body() {
        Some(body) => body.bytes().await?,
        None => Vec::new(),
    };
    let name = file.rsplit('/').next().unwrap_or(file);
    let headers = Headers::new();
    headers.set("content-type", &media_type)?;
    headers.set(
        "content-disposition",
        &format!("attachment; filename=\"{name}\""),
    )?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("content-security-policy", "sandbox; default-src 'none'")?;
    headers.set("cache-control", "private, max-age=300")?;
    headers.set("referrer-policy", "no-referrer")?;
    Ok(Response::from_bytes(bytes)?.with_headers(headers))
}
