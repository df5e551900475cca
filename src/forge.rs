//! The forge's REST API (GitHub's, or a GitHub Enterprise / compatible one at `FORGE_API_URL`),
//! called with the deployment's own token: pull requests and reading a repository's files.
//! Only the Worker calls it; the token never goes anywhere else.

use crate::error::{Error, Result};
use serde_json::Value;
use worker::{Fetch, Headers, Method, Request, RequestInit};

/// One JSON request to the forge API: its status and JSON body (`null` when not JSON).
pub async fn call(
    token: &str,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> Result<(u16, Value)> {
    let headers = Headers::new();
    headers.set("authorization", &format!("Bearer {token}"))?;
    headers.set("accept", "application/vnd.github+json")?;
    headers.set("user-agent", "handoff")?;
    headers.set("content-type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(body.to_string().into()));
    }
    let mut response = Fetch::Request(Request::new_with_init(url, &init)?)
        .send()
        .await
        .map_err(|e| Error::unavailable(format!("the forge API did not answer: {e}")))?;
    let status = response.status_code();
    let text = response.text().await.unwrap_or_default();
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// A folder of a repository on the forge, read through the contents API (subfolders included):
/// relative path → bytes. Stops with an error past `max_files` files or `max_bytes` bytes.
pub async fn read_folder(
    token: &str,
    api: &str,
    owner: &str,
    repo: &str,
    path: &str,
    git_ref: Option<&str>,
    limits: (usize, usize),
) -> Result<Vec<(String, Vec<u8>)>> {
    use base64::Engine;
    let (max_files, max_bytes) = limits;
    let query = git_ref
        .map(|r| format!("?ref={}", crate::http::query_value(r)))
        .unwrap_or_default();
    let root = path.trim_matches('/');
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut folders = vec![root.to_string()];
    while let Some(folder) = folders.pop() {
        let url = format!("{api}/repos/{owner}/{repo}/contents/{folder}{query}");
        let (status, listing) = call(token, Method::Get, &url, None).await?;
        match status {
            200 => {}
            404 => {
                return Err(Error::not_found(format!(
                    "{owner}/{repo} has no folder {:?}{}",
                    if folder.is_empty() { "/" } else { &folder },
                    git_ref.map(|r| format!(" at {r}")).unwrap_or_default()
                )))
            }
            401 | 403 => {
                return Err(Error::invalid(format!(
                    "the forge refused to show {owner}/{repo} (HTTP {status}); check that                      GITHUB_TOKEN can read it"
                )))
            }
            _ => {
                return Err(Error::unavailable(format!(
                    "the forge answered HTTP {status} for {owner}/{repo}"
                )))
            }
        }
        let entries = listing.as_array().cloned().ok_or_else(|| {
            Error::invalid(format!(
                "{folder:?} in {owner}/{repo} is a file, not a folder"
            ))
        })?;
        for entry in entries {
            let full = entry["path"].as_str().unwrap_or_default().to_string();
            let relative = full
                .strip_prefix(root)
                .unwrap_or(&full)
                .trim_start_matches('/')
                .to_string();
            match entry["type"].as_str() {
                Some("dir") => folders.push(full),
                Some("file") => {
                    if out.len() >= max_files {
                        return Err(Error::invalid(format!(
                            "the folder has more than {max_files} files"
                        )));
                    }
                    let url = format!("{api}/repos/{owner}/{repo}/contents/{full}{query}");
                    let (status, file) = call(token, Method::Get, &url, None).await?;
                    let content = file["content"].as_str().filter(|_| status == 200);
                    let bytes = content
                        .map(|c| c.replace(['\n', '\r'], ""))
                        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                        .ok_or_else(|| {
                            Error::unavailable(format!("could not read {full} (HTTP {status})"))
                        })?;
                    total += bytes.len();
                    if total > max_bytes {
                        return Err(Error::invalid(format!(
                            "the folder has more than {max_bytes} bytes"
                        )));
                    }
                    out.push((relative, bytes));
                }
                // Symlinks and submodules are not part of a worker.
                _ => {}
            }
        }
    }
    Ok(out)
}
