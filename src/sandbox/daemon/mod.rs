//! The Worker's client of the sandbox daemon's `/v1` API. The transport is the only thing that
//! differs between backends: a Cloudflare Container's TCP port, or a daemon URL (local
//! backend). Every call carries a short-lived token for this one sandbox. Its background
//! processes are in `processes`; what a program on a sandbox port answers is read by
//! `port_reply`, bounded.

mod port_reply;
mod processes;

use super::api::{port_watch, PortReply, PortRequest};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::http::{self, query_value};
use crate::jwt;
use crate::time::now_ms;
use futures::future::{select, Either};
use handoff_wire::{
    EgressLog, Encoding, ErrorBody, ErrorCode, ExecRequest, ExecResult, FileContent, FileList,
    FileWritten, GitClone, PortList, SandboxSpec, SandboxState, TokenClaims, Verdict,
    TOKEN_AUDIENCE,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;
use worker::{Delay, Env, Fetch, Fetcher, Headers, Method, Request, RequestInit, Response, Stub};

/// How long a minted daemon token lives.
const TOKEN_TTL_SECS: i64 = 300;
/// How long an ordinary daemon call may take.
const DEFAULT_LIMIT: Duration = Duration::from_secs(30);
/// Added to a command's own timeout for the daemon call that runs it.
const GRACE: Duration = Duration::from_secs(15);
/// How long packing or restoring a workspace may take.
const SNAPSHOT_LIMIT: Duration = Duration::from_secs(15 * 60);
/// The daemon's port inside a container.
pub const CONTAINER_PORT: u16 = 3000;
/// Names the sandbox a request to a container host is for (`host`; set by the sandbox object
/// only).
pub const SANDBOX_HEADER: &str = "x-handoff-sandbox";
/// The origin of requests to a container's daemon (only the path matters).
const CONTAINER_ORIGIN: &str = "http://sandbox-daemon";

/// Where the daemon is.
pub enum Transport {
    /// `SANDBOX_DAEMON_URL`, reached with a plain fetch.
    Local { base: String },
    /// A Cloudflare Container's port.
    Container(Fetcher),
    /// A Cloudflare Container of another size's class, reached through its host object (which
    /// starts it when it is not running).
    Hosted(Stub),
}

pub struct Daemon {
    transport: Transport,
    sandbox_id: String,
    secret: Vec<u8>,
}

impl Daemon {
    pub fn new(env: &Env, transport: Transport, sandbox_id: &str) -> Result<Daemon> {
        let secret = config::daemon_secret(env).ok_or_else(|| {
            Error::not_configured(format!(
                "{} is not set (at least 32 characters, the same value the sandbox daemon has)",
                config::DAEMON_SECRET
            ))
        })?;
        // A container holds one sandbox and gets that sandbox's key only: whoever takes over a
        // container cannot sign for any other sandbox. The local daemon serves many sandboxes
        // and holds the master.
        let secret = match transport {
            Transport::Container(_) | Transport::Hosted(_) => {
                container_key(&secret, sandbox_id).into_bytes()
            }
            Transport::Local { .. } => secret,
        };
        Ok(Daemon {
            transport,
            sandbox_id: sandbox_id.to_string(),
            secret,
        })
    }

    fn token(&self) -> Result<String> {
        let claims = TokenClaims {
            sub: self.sandbox_id.clone(),
            aud: TOKEN_AUDIENCE.to_string(),
            exp: now_ms() / 1000 + TOKEN_TTL_SECS,
        };
        jwt::sign(&self.secret, &claims).map_err(|e| Error::internal(format!("daemon token: {e}")))
    }

    fn url(&self, path: &str) -> String {
        let base = match &self.transport {
            Transport::Local { base } => base.as_str(),
            Transport::Container(_) | Transport::Hosted(_) => CONTAINER_ORIGIN,
        };
        format!("{base}/v1/sandboxes/{}{path}", self.sandbox_id)
    }

    /// Fetches from the daemon over the transport, giving up after `limit` (a hung daemon
    /// must not wedge the object waiting on it).
    async fn dispatch(&self, request: Request, limit: Option<Duration>) -> Result<Response> {
        let fetch = async {
            match &self.transport {
                Transport::Local { .. } => Fetch::Request(request).send().await,
                Transport::Container(fetcher) => fetcher.fetch_request(request).await,
                Transport::Hosted(host) => {
                    let mut request = request;
                    request
                        .headers_mut()?
                        .set(SANDBOX_HEADER, &self.sandbox_id)?;
                    host.fetch_with_request(request).await
                }
            }
        };
        let outcome = match limit {
            Some(limit) => {
                let fetch = Box::pin(fetch);
                let timer = Box::pin(Delay::from(limit));
                match select(fetch, timer).await {
                    Either::Left((result, _)) => result,
                    Either::Right(_) => {
                        return Err(Error::unavailable(format!(
                            "the sandbox daemon did not answer within {} s",
                            limit.as_secs()
                        )))
                    }
                }
            }
            None => fetch.await,
        };
        outcome.map_err(|e| {
            Error::unavailable(format!(
                "the sandbox daemon did not answer ({e}); it may be starting or down — retry shortly"
            ))
        })
    }

    /// Sends a request to the daemon and returns the raw response (errors already mapped).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<worker::wasm_bindgen::JsValue>,
        content_type: Option<&str>,
        limit: Duration,
    ) -> Result<Response> {
        let headers = Headers::new();
        headers.set("authorization", &format!("Bearer {}", self.token()?))?;
        if let Some(ct) = content_type {
            headers.set("content-type", ct)?;
        }
        let mut init = RequestInit::new();
        init.with_method(method)
            .with_headers(headers)
            .with_body(body);
        let request = Request::new_with_init(&self.url(path), &init)?;
        let response = self.dispatch(request, Some(limit)).await?;
        if (200..300).contains(&response.status_code()) {
            Ok(response)
        } else {
            Err(daemon_error(response).await)
        }
    }

    /// The daemon's unauthenticated health endpoint (used while a container starts).
    pub async fn health(&self) -> Result<()> {
        let url = match &self.transport {
            Transport::Local { base } => format!("{base}/v1/health"),
            Transport::Container(_) | Transport::Hosted(_) => {
                format!("{CONTAINER_ORIGIN}/v1/health")
            }
        };
        let request = Request::new(&url, Method::Get)?;
        let response = self.dispatch(request, Some(Duration::from_secs(5))).await?;
        if response.status_code() == 200 {
            Ok(())
        } else {
            Err(Error::unavailable(format!(
                "sandbox daemon health: HTTP {}",
                response.status_code()
            )))
        }
    }

    /// Forwards an incoming request (method, headers, streamed body) to `path` on the daemon and
    /// returns the daemon's response as it is, whatever its status.
    pub async fn forward(&self, incoming: &Request, path: &str) -> Result<Response> {
        let headers = Headers::new();
        for (name, value) in incoming.headers().entries() {
            let lower = name.to_ascii_lowercase();
            if lower == "host"
                || lower == "authorization"
                || lower.starts_with("cf-")
                || lower == "cookie"
            {
                continue;
            }
            headers.append(&name, &value)?;
        }
        headers.set("authorization", &format!("Bearer {}", self.token()?))?;
        let mut init = RequestInit::new();
        init.with_method(incoming.method()).with_headers(headers);
        if let Some(body) = incoming.inner().body() {
            init.with_body(Some(body.into()));
        }
        let request = Request::new_with_init(&self.url(path), &init)?;
        // Previews may stream for as long as the client listens: no time limit.
        self.dispatch(request, None).await
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T> {
        self.call_within(method, path, body, DEFAULT_LIMIT).await
    }

    async fn call_within<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        limit: Duration,
    ) -> Result<T> {
        let body = match body {
            Some(b) => Some(serde_json::to_string(b)?),
            None => None,
        };
        let text = self.exchange_json(method, path, body, limit).await?;
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("undecodable daemon reply: {e}")))
    }

    /// Sends a JSON body (if any), returns the reply's JSON (not generic: one copy for all).
    async fn exchange_json(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
        limit: Duration,
    ) -> Result<String> {
        let response = self
            .send(
                method,
                path,
                body.map(Into::into),
                Some("application/json"),
                limit,
            )
            .await?;
        http::body_text(response).await
    }

    /// Creates or updates the sandbox; `start`: it is started at once, in the background, for a
    /// first command (not for one a snapshot is about to be restored into).
    pub async fn put(&self, spec: &SandboxSpec, start: bool) -> Result<SandboxState> {
        let path = if start { "?start=1" } else { "" };
        self.call(Method::Put, path, Some(spec)).await
    }

    pub async fn state(&self) -> Result<SandboxState> {
        self.call::<(), _>(Method::Get, "", None).await
    }

    pub async fn delete(&self) -> Result<()> {
        self.send(Method::Delete, "", None, None, DEFAULT_LIMIT)
            .await
            .map(|_| ())
    }

    pub async fn stop(&self) -> Result<SandboxState> {
        self.call::<(), _>(Method::Post, "/stop", None).await
    }

    pub async fn exec(&self, req: &ExecRequest) -> Result<ExecResult> {
        let limit = Duration::from_millis(req.timeout_ms) + GRACE;
        self.call_within(Method::Post, "/exec", Some(req), limit)
            .await
    }

    /// Does something on the sandbox's desktop (started on demand) and answers its screen;
    /// `action` is a `handoff_wire::desktop::DesktopAction` as JSON.
    pub async fn desktop(
        &self,
        action: &serde_json::Value,
    ) -> Result<handoff_wire::desktop::DesktopReply> {
        // Starting the desktop, the longest wait and the screenshot.
        let limit = Duration::from_secs(60);
        self.call_within(Method::Post, "/desktop", Some(action), limit)
            .await
    }

    /// Starts a command whose output comes back as NDJSON [`handoff_wire::ExecEvent`]s while
    /// it runs; the limit covers only the start (the daemon enforces the command's timeout).
    pub async fn exec_stream(&self, req: &ExecRequest) -> Result<Response> {
        let body = serde_json::to_string(req)?;
        self.send(
            Method::Post,
            "/exec/stream",
            Some(body.into()),
            Some("application/json"),
            DEFAULT_LIMIT,
        )
        .await
    }

    pub async fn read_file(
        &self,
        path: &str,
        encoding: Encoding,
        max: Option<u64>,
    ) -> Result<FileContent> {
        let enc = match encoding {
            Encoding::Text => "text",
            Encoding::Base64 => "base64",
        };
        let mut query = format!("/files?path={}&encoding={enc}", query_value(path));
        if let Some(max) = max {
            query.push_str(&format!("&max={max}"));
        }
        self.call::<(), _>(Method::Get, &query, None).await
    }

    pub async fn write_file(&self, path: &str, bytes: Vec<u8>) -> Result<FileWritten> {
        let array = worker::js_sys::Uint8Array::from(bytes.as_slice());
        let query = format!("/files?path={}", query_value(path));
        let response = self
            .send(
                Method::Put,
                &query,
                Some(array.into()),
                Some("application/octet-stream"),
                DEFAULT_LIMIT,
            )
            .await?;
        let text = http::body_text(response).await?;
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("undecodable daemon reply: {e}")))
    }

    pub async fn list(&self, path: &str) -> Result<FileList> {
        let query = format!("/files/list?path={}", query_value(path));
        self.call::<(), _>(Method::Get, &query, None).await
    }

    pub async fn zip(&self, path: &str) -> Result<Vec<u8>> {
        let query = format!("/files/zip?path={}", query_value(path));
        let mut response = self
            .send(Method::Get, &query, None, None, DEFAULT_LIMIT)
            .await?;
        Ok(response.bytes().await?)
    }

    pub async fn ports(&self) -> Result<PortList> {
        self.call::<(), _>(Method::Get, "/ports", None).await
    }

    pub async fn egress(&self, limit: u32, verdict: Option<Verdict>) -> Result<EgressLog> {
        let mut query = format!("/egress?limit={limit}");
        if let Some(v) = verdict {
            query.push_str(match v {
                Verdict::Allowed => "&verdict=allowed",
                Verdict::Blocked => "&verdict=blocked",
            });
        }
        self.call::<(), _>(Method::Get, &query, None).await
    }

    pub async fn git_clone(&self, req: &GitClone) -> Result<ExecResult> {
        let limit = Duration::from_millis(req.timeout_ms.max(5 * 60 * 1000)) + GRACE;
        self.call_within(Method::Post, "/git/clone", Some(req), limit)
            .await
    }

    /// An HTTP request to a program listening on `port` inside the sandbox; returns its status
    /// and body, whatever the status (errors of the daemon itself are errors).
    pub async fn port_request(&self, req: &PortRequest) -> Result<PortReply> {
        let headers = Headers::new();
        headers.set("authorization", &format!("Bearer {}", self.token()?))?;
        headers.set("content-type", "application/json")?;
        headers.set("accept", "application/json")?;
        if let Some(auth) = &req.authorization {
            headers.set(handoff_wire::UPSTREAM_AUTHORIZATION, auth)?;
        }
        if let Some(ms) = req.timeout_ms {
            headers.set(handoff_wire::RESPONSE_TIMEOUT, &ms.to_string())?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::from(req.method.clone()))
            .with_headers(headers);
        if let Some(body) = &req.body {
            init.with_body(Some(body.clone().into()));
        }
        let path = format!(
            "/ports/{}/http/{}",
            req.port,
            req.path.trim_start_matches('/')
        );
        let request = Request::new_with_init(&self.url(&path), &init)?;
        let wait = Duration::from_millis(req.timeout_ms.unwrap_or(5 * 60 * 1000));
        let response = self.dispatch(request, Some(wait + GRACE)).await?;
        let status = response.status_code();
        if response.headers().has(handoff_wire::DAEMON_ERROR)? {
            return Err(daemon_error_from(response).await);
        }
        let (body, seen) = match (&req.watch, &req.keep) {
            (Some(watch), _) => (
                String::new(),
                port_watch::read_until(response, watch).await?,
            ),
            // The program's answer: bounded in size, and in time as its start was.
            (None, Some(skeleton)) if (200..300).contains(&status) => {
                let pruned = port_reply::read_pruned(response, req.port, wait, skeleton);
                (pruned.await?, false)
            }
            (None, _) => (port_reply::read(response, req.port, wait).await?, false),
        };
        Ok(PortReply { status, body, seen })
    }

    /// The workspace as a tar.gz stream.
    pub async fn snapshot(&self) -> Result<Response> {
        self.send(Method::Get, "/snapshot", None, None, SNAPSHOT_LIMIT)
            .await
    }

    /// Replaces the workspace with a tar.gz stream.
    pub async fn restore(&self, body: worker::wasm_bindgen::JsValue) -> Result<SandboxState> {
        let response = self
            .send(
                Method::Put,
                "/snapshot",
                Some(body),
                Some("application/gzip"),
                SNAPSHOT_LIMIT,
            )
            .await?;
        let text = http::body_text(response).await?;
        serde_json::from_str(&text)
            .map_err(|e| Error::internal(format!("undecodable daemon reply: {e}")))
    }
}

async fn daemon_error(response: Response) -> Error {
    daemon_error_from(response).await
}

/// Turns a daemon error response into the Worker's error, keeping its message.
async fn daemon_error_from(response: Response) -> Error {
    let status = response.status_code();
    let text = http::body_text(response).await.unwrap_or_default();
    let body = serde_json::from_str::<ErrorBody>(&text).unwrap_or(ErrorBody {
        code: ErrorCode::from_status(status),
        message: match status {
            413 => "the request is too large for the sandbox daemon".to_string(),
            _ => format!("sandbox daemon answered HTTP {status}"),
        },
    });
    if body.code == ErrorCode::Unauthorized {
        let message = format!(
            "the sandbox daemon refused the Worker's credentials ({}); {} must be the same on both",
            body.message,
            config::DAEMON_SECRET
        );
        return Error::not_configured(message);
    }
    Error::new(kind_of(body.code), body.message)
}

/// The Worker's kind of a daemon error (a refused daemon key is handled before: an operator's).
pub(super) fn kind_of(code: ErrorCode) -> ErrorKind {
    match code {
        ErrorCode::BadRequest | ErrorCode::TooLarge => ErrorKind::InvalidInput,
        ErrorCode::PortClosed => ErrorKind::PortClosed,
        ErrorCode::NotFound => ErrorKind::NotFound,
        ErrorCode::Conflict => ErrorKind::Conflict,
        ErrorCode::Unavailable | ErrorCode::Unauthorized | ErrorCode::Timeout => {
            ErrorKind::Unavailable
        }
        ErrorCode::IsolationUnavailable => ErrorKind::NotConfigured,
        ErrorCode::Internal => ErrorKind::Internal,
    }
}

/// The daemon key of the container that holds `sandbox_id`, derived from the master.
pub fn container_key(master: &[u8], sandbox_id: &str) -> String {
    crate::mac::derive_key(master, "handoff:sandbox-daemon-key", sandbox_id)
}
