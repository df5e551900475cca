//! The container hosts of the smaller sizes: Durable Objects whose only job is the Cloudflare
//! Container of one `small` or `medium` sandbox, on that size's instance type (each class has
//! its own `[[containers]]` entry in wrangler.toml). A `large` sandbox — the default — runs in
//! its sandbox object's own container instead.
//!
//! The sandbox object stays the sandbox's only owner (record, snapshots, idle timer); a host is
//! named after the sandbox, holds no state and answers only the sandbox object (nothing routes
//! outside requests to it). It starts its container with that sandbox's key alone, waits for
//! the daemon, and passes the object's daemon requests to the container's port as they are —
//! starting the container first if it stopped, so the object sees a daemon that lost the
//! sandbox and restores it, exactly as with its own container.

use super::container::{self, Watch};
use super::daemon::SANDBOX_HEADER;
use crate::error::{Error, ErrorKind, Result};
use crate::sandboxes::Size;
use handoff_wire::{ErrorBody, ErrorCode};
use serde_json::json;
use std::rc::Rc;
use worker::{durable_object, DurableObject, Env, Request, Response, State, Stub};

/// Starts the container unless it runs; answers `{"started": bool}` once its daemon answers.
const ENSURE_PATH: &str = "/__host/ensure";
/// Answers `{"running": bool}` without starting anything.
const RUNNING_PATH: &str = "/__host/running";
/// Stops the container (pause, delete).
const DESTROY_PATH: &str = "/__host/destroy";

/// The binding of the host class for sandboxes of `size`, if that size has one.
pub fn binding(size: Size) -> Option<&'static str> {
    match size {
        Size::Small => Some("SANDBOX_HOSTS_SMALL"),
        Size::Medium => Some("SANDBOX_HOSTS_MEDIUM"),
        Size::Large => None,
    }
}

/// Starts the host's container for `sandbox_id` unless it runs; true when it was started.
pub async fn ensure(host: &Stub, sandbox_id: &str) -> Result<bool> {
    let reply = ask(host, sandbox_id, ENSURE_PATH).await?;
    Ok(reply["started"].as_bool().unwrap_or(false))
}

/// Whether the host's container runs (false: it is gone, with whatever it held).
pub async fn running(host: &Stub, sandbox_id: &str) -> Result<bool> {
    let reply = ask(host, sandbox_id, RUNNING_PATH).await?;
    Ok(reply["running"].as_bool().unwrap_or(false))
}

/// Stops the host's container.
pub async fn destroy(host: &Stub, sandbox_id: &str) -> Result<()> {
    ask(host, sandbox_id, DESTROY_PATH).await.map(|_| ())
}

async fn ask(host: &Stub, sandbox_id: &str, path: &str) -> Result<serde_json::Value> {
    let mut request = Request::new(&format!("http://host{path}"), worker::Method::Post)?;
    request.headers_mut()?.set(SANDBOX_HEADER, sandbox_id)?;
    let mut response = host.fetch_with_request(request).await.map_err(|e| {
        Error::unavailable(format!("the sandbox's container host did not answer: {e}"))
    })?;
    let text = response.text().await.unwrap_or_default();
    if response.status_code() != 200 {
        let body: Option<ErrorBody> = serde_json::from_str(&text).ok();
        return Err(Error::unavailable(body.map(|b| b.message).unwrap_or_else(
            || {
                format!(
                    "the sandbox's container host answered HTTP {}",
                    response.status_code()
                )
            },
        )));
    }
    serde_json::from_str(&text).map_err(|e| Error::internal(format!("container host reply: {e}")))
}

/// What both host classes do.
struct Host {
    state: State,
    env: Env,
    watch: Rc<Watch>,
}

impl Host {
    fn new(state: State, env: Env) -> Host {
        Host {
            state,
            env,
            watch: Rc::default(),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        Ok(match self.serve(req).await {
            Ok(response) => response,
            Err(e) => error_response(&e),
        })
    }

    async fn serve(&self, req: Request) -> Result<Response> {
        let container = self.state.container().ok_or_else(|| {
            Error::not_configured(
                "this sandbox host has no container: wrangler.toml needs its [[containers]] entry",
            )
        })?;
        let sandbox_id = req
            .headers()
            .get(SANDBOX_HEADER)?
            .filter(|id| crate::ids::is_valid(crate::ids::SANDBOX, id))
            .ok_or_else(|| Error::invalid("a request to a sandbox host names its sandbox"))?;
        match req.path().as_str() {
            RUNNING_PATH => Ok(crate::http::json(
                200,
                &json!({"running": container::running(&container, &self.watch)}),
            )),
            DESTROY_PATH => {
                let _ = container.destroy(None).await;
                Ok(crate::http::json(200, &json!({})))
            }
            ENSURE_PATH => {
                let (_, started) =
                    container::ensure(&container, &self.env, &sandbox_id, &self.watch).await?;
                Ok(crate::http::json(200, &json!({"started": started})))
            }
            _ => {
                let (port, _) =
                    container::ensure(&container, &self.env, &sandbox_id, &self.watch).await?;
                Ok(port.fetch_request(req).await?)
            }
        }
    }
}

/// An error as the daemon would answer it, so the sandbox object reads both alike.
fn error_response(e: &Error) -> Response {
    let code = code_of(e.kind);
    crate::http::json(
        code.http_status(),
        &ErrorBody {
            code,
            message: e.message.clone(),
        },
    )
}

/// The daemon's code for an error of `kind`: the sandbox object reads it back as the same kind
/// (`daemon::kind_of`) where the daemon has one.
fn code_of(kind: ErrorKind) -> ErrorCode {
    match kind {
        ErrorKind::InvalidInput => ErrorCode::BadRequest,
        ErrorKind::PortClosed => ErrorCode::PortClosed,
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::Conflict => ErrorCode::Conflict,
        ErrorKind::NotConfigured => ErrorCode::IsolationUnavailable,
        ErrorKind::Unavailable => ErrorCode::Unavailable,
        ErrorKind::Unauthorized
        | ErrorKind::Forbidden
        | ErrorKind::McpSessionGone
        | ErrorKind::RateLimited
        | ErrorKind::Internal => ErrorCode::Internal,
    }
}

/// The container host of `small` sandboxes (instance type in wrangler.toml).
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
pub struct SandboxHostSmall {
    host: Host,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for SandboxHostSmall {
    fn new(state: State, env: Env) -> Self {
        Self {
            host: Host::new(state, env),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        self.host.fetch(req).await
    }
}

/// The container host of `medium` sandboxes (instance type in wrangler.toml).
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
pub struct SandboxHostMedium {
    host: Host,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for SandboxHostMedium {
    fn new(state: State, env: Env) -> Self {
        Self {
            host: Host::new(state, env),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        self.host.fetch(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_errors_read_back_as_their_own_kind() {
        use ErrorKind::*;
        for kind in [
            InvalidInput,
            PortClosed,
            NotFound,
            Conflict,
            NotConfigured,
            Unavailable,
        ] {
            assert_eq!(super::super::daemon::kind_of(code_of(kind)), kind);
        }
        // A host's own credentials or limits are not the caller's: they read as internal.
        for kind in [
            Unauthorized,
            Forbidden,
            McpSessionGone,
            RateLimited,
            Internal,
        ] {
            assert_eq!(code_of(kind), ErrorCode::Internal);
        }
    }
}
