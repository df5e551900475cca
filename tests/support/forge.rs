//! A local git forge: real git smart HTTP (clone, fetch, push) through `git http-backend`, and a
//! GitHub-compatible pulls API under `/api` — the stand-in for github.com / api.github.com.
//! Git requests must carry `Basic x-access-token:<token>`, API requests `Bearer <token>`, the
//! way GitHub takes them, so the tests see whether the credential proxy injects the real token.

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub owner: String,
    pub repo: String,
    pub title: String,
    pub head: String,
    pub base: String,
    pub body: String,
    pub html_url: String,
}

/// One request the forge saw (for checking which credentials arrived).
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorized: bool,
    pub authorization: String,
}

struct ForgeState {
    root: PathBuf,
    token: String,
    base: Mutex<String>,
    pulls: Mutex<Vec<Pull>>,
    seen: Mutex<Vec<Seen>>,
}

pub struct Forge {
    pub port: u16,
    state: Arc<ForgeState>,
}

impl Forge {
    /// Serves from its own thread for the life of the process; repositories live in `root`.
    pub fn start(root: PathBuf, token: &str) -> Forge {
        std::fs::create_dir_all(&root).expect("forge root");
        let state = Arc::new(ForgeState {
            root,
            token: token.to_string(),
            base: Mutex::new(String::new()),
            pulls: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/api/repos/{owner}/{repo}/pulls", any(pulls))
            .route("/api/repos/{owner}/{repo}/pulls/{number}", any(pull))
            .route("/api/repos/{owner}/{repo}/contents", any(contents_root))
            .route("/api/repos/{owner}/{repo}/contents/{*path}", any(contents))
            .fallback(any(smart_http))
            .with_state(state.clone());
        let port = crate::serve_forever(app);
        if let Ok(mut base) = state.base.lock() {
            *base = format!("http://127.0.0.1:{port}");
        }
        Forge { port, state }
    }

    /// `FORGE_GIT_URL`.
    pub fn git_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `FORGE_API_URL`.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }

    /// The bare repository on disk.
    pub fn bare(&self, owner: &str, repo: &str) -> PathBuf {
        self.state.root.join(owner).join(format!("{repo}.git"))
    }

    /// Creates `owner/repo` with one commit of `files` on `main`; returns its clone URL.
    pub fn create_repo(&self, owner: &str, repo: &str, files: &[(&str, &str)]) -> String {
        let bare = self.bare(owner, repo);
        let _ = std::fs::remove_dir_all(&bare);
        run_git(
            &["init", "-q", "--bare", "-b", "main"],
            &self.state.root,
            Some(&bare),
        );
        run_git(&["config", "http.receivepack", "true"], &bare, None);
        let work = self.state.root.join(format!(".work-{owner}-{repo}"));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).expect("work dir");
        for (path, content) in files {
            let file = work.join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).expect("dirs");
            }
            std::fs::write(file, content).expect("write");
        }
        run_git(&["init", "-q", "-b", "main"], &work, None);
        run_git(&["add", "-A"], &work, None);
        run_git(
            &[
                "-c",
                "user.name=forge",
                "-c",
                "user.email=forge@example.invalid",
                "commit",
                "-qm",
                "Initial commit",
            ],
            &work,
            None,
        );
        let bare_str = bare.display().to_string();
        run_git(&["push", "-q", &bare_str, "main"], &work, None);
        let _ = std::fs::remove_dir_all(&work);
        format!("{}/{owner}/{repo}", self.git_url())
    }

    /// A file as committed on a branch, if the branch and file exist.
    pub fn file_on_branch(
        &self,
        owner: &str,
        repo: &str,
        branch: &str,
        path: &str,
    ) -> Option<String> {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(self.bare(owner, repo))
            .args(["show", &format!("{branch}:{path}")])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn branches(&self, owner: &str, repo: &str) -> Vec<String> {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(self.bare(owner, repo))
            .args(["for-each-ref", "--format=%(refname:short)", "refs/heads"])
            .output()
            .expect("git for-each-ref");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Every ref of a repository with the commit it points at.
    pub fn refs(&self, owner: &str, repo: &str) -> Vec<(String, String)> {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(self.bare(owner, repo))
            .args(["for-each-ref", "--format=%(objectname) %(refname)"])
            .output()
            .expect("git for-each-ref");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(sha, name)| (sha.to_string(), name.to_string()))
            .collect()
    }

    pub fn pulls(&self) -> Vec<Pull> {
        self.state
            .pulls
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

fn run_git(args: &[&str], cwd: &Path, extra: Option<&Path>) {
    let mut cmd = Command::new("git");
    cmd.args(args).current_dir(cwd);
    if let Some(extra) = extra {
        cmd.arg(extra);
    }
    let out = cmd.output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn record(state: &ForgeState, method: &Method, path: &str, headers: &HeaderMap, authorized: bool) {
    if let Ok(mut seen) = state.seen.lock() {
        seen.push(Seen {
            method: method.to_string(),
            path: path.to_string(),
            authorized,
            authorization: header(headers, "authorization"),
        });
    }
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn api_authorized(state: &ForgeState, headers: &HeaderMap) -> bool {
    let auth = header(headers, "authorization");
    auth == format!("Bearer {}", state.token) || auth == format!("token {}", state.token)
}

fn git_authorized(state: &ForgeState, headers: &HeaderMap) -> bool {
    let expected =
        base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{}", state.token));
    header(headers, "authorization") == format!("Basic {expected}")
}

fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        Json(json!({"message": "Bad credentials"})),
    )
        .into_response();
    response.headers_mut().insert(
        "www-authenticate",
        "Basic realm=\"forge\"".parse().expect("header"),
    );
    response
}

fn pull_json(p: &Pull) -> Value {
    json!({"number": p.number, "title": p.title, "body": p.body, "html_url": p.html_url,
        "head": {"ref": p.head}, "base": {"ref": p.base}, "state": "open"})
}

/// The end of a repository name whose pull requests the forge refuses (pushes it takes).
pub const NO_PULLS: &str = "-no-pulls";

async fn pulls(
    State(state): State<Arc<ForgeState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorized = api_authorized(&state, &headers);
    record(
        &state,
        &method,
        &format!("/api/repos/{owner}/{repo}/pulls"),
        &headers,
        authorized,
    );
    if !authorized {
        return unauthorized();
    }
    if !state.root.join(&owner).join(format!("{repo}.git")).exists() {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    }
    if method == Method::GET {
        let list: Vec<Value> = state
            .pulls
            .lock()
            .map(|p| {
                p.iter()
                    .filter(|p| p.owner == owner && p.repo == repo)
                    .map(pull_json)
                    .collect()
            })
            .unwrap_or_default();
        return Json(list).into_response();
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    // A repository whose name says so takes pushes but no pull requests, as GitHub answers an
    // app that may write contents but not pull requests.
    if repo.ends_with(NO_PULLS) {
        let refused = json!({"message": "Resource not accessible by integration", "status": "403"});
        return (StatusCode::FORBIDDEN, Json(refused)).into_response();
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (Some(title), Some(head), Some(base)) = (
        request["title"].as_str(),
        request["head"].as_str(),
        request["base"].as_str(),
    ) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Validation Failed"})),
        )
            .into_response();
    };
    let base_url = state.base.lock().map(|b| b.clone()).unwrap_or_default();
    let mut pulls = match state.pulls.lock() {
        Ok(p) => p,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let number = pulls.len() as u64 + 1;
    let pull = Pull {
        number,
        owner: owner.clone(),
        repo: repo.clone(),
        title: title.to_string(),
        head: head.to_string(),
        base: base.to_string(),
        body: request["body"].as_str().unwrap_or_default().to_string(),
        html_url: format!("{base_url}/{owner}/{repo}/pull/{number}"),
    };
    let json = pull_json(&pull);
    pulls.push(pull);
    (StatusCode::CREATED, Json(json)).into_response()
}

async fn pull(
    State(state): State<Arc<ForgeState>>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, u64)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let authorized = api_authorized(&state, &headers);
    record(
        &state,
        &method,
        &format!("/api/repos/{owner}/{repo}/pulls/{number}"),
        &headers,
        authorized,
    );
    if !authorized {
        return unauthorized();
    }
    let found = state.pulls.lock().ok().and_then(|p| {
        p.iter()
            .find(|p| p.owner == owner && p.repo == repo && p.number == number)
            .map(pull_json)
    });
    match found {
        Some(p) => Json(p).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response(),
    }
}

async fn contents_root(
    state: State<Arc<ForgeState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    query: Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    contents(state, UrlPath((owner, repo, String::new())), query, headers).await
}

/// GitHub's contents API, read from the bare repository: a folder as a list of entries, a
/// file with its content in base64 (wrapped at 60 characters, as GitHub sends it).
async fn contents(
    State(state): State<Arc<ForgeState>>,
    UrlPath((owner, repo, path)): UrlPath<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let authorized = api_authorized(&state, &headers);
    let shown = format!("/api/repos/{owner}/{repo}/contents/{path}");
    record(&state, &Method::GET, &shown, &headers, authorized);
    if !authorized {
        return unauthorized();
    }
    let bare = state.root.join(&owner).join(format!("{repo}.git"));
    let git_ref = query.get("ref").cloned().unwrap_or_else(|| "main".into());
    let object = format!("{git_ref}:{}", path.trim_matches('/'));
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&bare)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let not_found =
        || (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    let Some(kind) = git(&["cat-file", "-t", &object]) else {
        return not_found();
    };
    let base = path.trim_matches('/');
    let joined = |name: &str| {
        if base.is_empty() {
            name.to_string()
        } else {
            format!("{base}/{name}")
        }
    };
    match String::from_utf8_lossy(&kind).trim() {
        "tree" => {
            let listing = git(&["ls-tree", "-l", &object]).unwrap_or_default();
            let entries: Vec<Value> = String::from_utf8_lossy(&listing)
                .lines()
                .filter_map(|line| {
                    let (meta, name) = line.split_once('\t')?;
                    let fields: Vec<&str> = meta.split_whitespace().collect();
                    let kind = match *fields.get(1)? {
                        "tree" => "dir",
                        "blob" => "file",
                        _ => "submodule",
                    };
                    Some(json!({"name": name, "path": joined(name), "type": kind,
                                "size": fields.get(3).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)}))
                })
                .collect();
            Json(Value::Array(entries)).into_response()
        }
        "blob" => {
            let bytes = git(&["cat-file", "blob", &object]).unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let wrapped: Vec<String> = encoded
                .as_bytes()
                .chunks(60)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            let name = base.rsplit('/').next().unwrap_or(base);
            Json(
                json!({"type": "file", "encoding": "base64", "name": name, "path": base,
                        "size": bytes.len(), "content": wrapped.join("\n") + "\n"}),
            )
            .into_response()
        }
        _ => not_found(),
    }
}

/// Git smart HTTP through `git http-backend` (CGI).
async fn smart_http(
    State(state): State<Arc<ForgeState>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let authorized = git_authorized(&state, &headers);
    record(&state, &method, &path, &headers, authorized);
    if !authorized {
        return unauthorized();
    }
    let service_ok = path.ends_with("/info/refs")
        || path.ends_with("/git-upload-pack")
        || path.ends_with("/git-receive-pack");
    if !service_ok || path.contains("..") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let _ = query;
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", &path)
        .env("REQUEST_METHOD", method.as_str())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header(&headers, "content-type"))
        .env("REMOTE_USER", "handoff")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("GIT_HTTP_MAX_REQUEST_BUFFER", "100M")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let encoding = header(&headers, "content-encoding");
    if !encoding.is_empty() {
        cmd.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let protocol = header(&headers, "git-protocol");
    if !protocol.is_empty() {
        cmd.env("GIT_PROTOCOL", protocol);
    }
    let Ok(mut child) = cmd.spawn() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&body).await;
    }
    let Ok(output) = child.wait_with_output().await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    cgi_response(&output.stdout)
}

fn cgi_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, sep)) = split else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("status") {
                let code = value
                    .split(' ')
                    .next()
                    .and_then(|c| c.parse::<u16>().ok())
                    .unwrap_or(200);
                builder = builder.status(code);
            } else {
                builder = builder.header(name.trim(), value);
            }
        }
    }
    builder
        .body(Body::from(raw[end + sep..].to_vec()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_push_and_pull_requests_need_the_token() {
        let root = std::env::temp_dir().join(format!("forge-selftest-{}", std::process::id()));
        let forge = Forge::start(root.join("repos"), "forge-token");
        let url = forge.create_repo("acme", "widgets", &[("README.md", "hello\n")]);
        let work = root.join("clone");
        let auth = format!(
            "Authorization: Basic {}",
            base64::engine::general_purpose::STANDARD.encode("x-access-token:forge-token")
        );
        let clone = |extra: &str| {
            Command::new("git")
                .args([
                    "-c",
                    &format!("http.extraHeader={extra}"),
                    "clone",
                    "-q",
                    &url,
                ])
                .arg(&work)
                .env("GIT_TERMINAL_PROMPT", "0")
                .output()
                .unwrap()
        };
        assert!(!clone("Authorization: Basic d3Jvbmc6d3Jvbmc=")
            .status
            .success());
        let ok = clone(&auth);
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        std::fs::write(work.join("new.txt"), "x").unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&work)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&["checkout", "-qb", "feature"]);
        run(&["add", "-A"]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@x",
            "commit",
            "-qm",
            "add",
        ]);
        run(&[
            "-c",
            &format!("http.extraHeader={auth}"),
            "push",
            "-q",
            "origin",
            "feature",
        ]);
        assert_eq!(
            forge
                .file_on_branch("acme", "widgets", "feature", "new.txt")
                .as_deref(),
            Some("x")
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
