//! The daemon's HTTP API (`/v1`, documented in `handoff-wire`), built in one place. Handlers are
//! thin: authenticate, decode, call the domain module, encode.

use crate::auth::Verifier;
use extract::{Authorized, JsonBody, SandboxId};

mod extract;
use crate::error::{ApiError, Result};
use crate::sandbox::{Registry, Sandbox};
use crate::{exec, files, git, ports, processes, snapshot};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post, put};
use axum::{Json, Router};
use futures::StreamExt;
use handoff_wire::{
    EgressLog, Encoding, ExecRequest, GitCheckout, GitClone, Health, PortList, ProcessList,
    SandboxSpec, StartProcess, Verdict, LARGE_READ_CAP, READ_CAP, WRITE_CAP,
};
use std::collections::HashMap;
use std::sync::Arc;

pub struct App {
    pub registry: Arc<Registry>,
    pub verifier: Verifier,
}

type AppState = State<Arc<App>>;
type Params = Query<HashMap<String, String>>;

pub fn router(app: Arc<App>) -> Router {
    let sandbox = "/v1/sandboxes/{id}";
    Router::new()
        .route("/v1/health", get(health))
        .route(
            sandbox,
            put(put_sandbox).get(get_sandbox).delete(delete_sandbox),
        )
        .route(&format!("{sandbox}/stop"), post(stop))
        .route(
            &format!("{sandbox}/snapshot"),
            get(get_snapshot)
                .put(put_snapshot)
                .layer(DefaultBodyLimit::disable()),
        )
        .route(&format!("{sandbox}/exec"), post(exec_run))
        .route(&format!("{sandbox}/exec/stream"), post(exec_stream))
        .route(&format!("{sandbox}/desktop"), post(desktop))
        .route(
            &format!("{sandbox}/processes"),
            post(start_process).get(list_processes),
        )
        .route(
            &format!("{sandbox}/processes/{{pid}}/logs"),
            get(process_logs),
        )
        .route(
            &format!("{sandbox}/processes/{{pid}}"),
            axum::routing::delete(kill_process),
        )
        .route(
            &format!("{sandbox}/processes/{{pid}}/freeze"),
            post(freeze_process),
        )
        .route(
            &format!("{sandbox}/processes/{{pid}}/thaw"),
            post(thaw_process),
        )
        .route(
            &format!("{sandbox}/files"),
            get(read_file)
                .put(write_file)
                .delete(delete_file)
                .layer(DefaultBodyLimit::disable()),
        )
        .route(&format!("{sandbox}/files/list"), get(list_files))
        .route(&format!("{sandbox}/files/mkdir"), post(mkdir))
        .route(&format!("{sandbox}/files/zip"), get(zip_dir))
        .route(&format!("{sandbox}/git/clone"), post(git_clone))
        .route(&format!("{sandbox}/git/checkout"), post(git_checkout))
        .route(&format!("{sandbox}/ports"), get(list_ports))
        .route(
            &format!("{sandbox}/ports/{{port}}/http"),
            any(preview_root).layer(DefaultBodyLimit::disable()),
        )
        .route(
            &format!("{sandbox}/ports/{{port}}/http/"),
            any(preview_root).layer(DefaultBodyLimit::disable()),
        )
        .route(
            &format!("{sandbox}/ports/{{port}}/http/{{*path}}"),
            any(preview).layer(DefaultBodyLimit::disable()),
        )
        .route(&format!("{sandbox}/egress"), get(egress_log))
        .fallback(|| async { ApiError::not_found("no such route in the sandbox daemon API (v1)") })
        .with_state(app)
}

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("query parameter {name} is required")))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::internal("worker thread failed"))?
}

async fn health(State(app): AppState) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        isolation: app.registry.isolation(),
    })
}

async fn put_sandbox(
    State(app): AppState,
    SandboxId(id): SandboxId,
    Query(params): Params,
    body: Bytes,
) -> Result<impl IntoResponse> {
    let spec: SandboxSpec = if body.is_empty() {
        SandboxSpec::default()
    } else {
        extract::decode(&body)?
    };
    let start = match params.get("start").map(String::as_str) {
        None | Some("0") => false,
        Some("1") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "query parameter start must be 0 or 1, not {other:?}"
            )))
        }
    };
    let sandbox = app.registry.put(&id, spec)?;
    let state = sandbox.state().await;
    if start {
        start_soon(app.registry.clone(), sandbox);
    }
    Ok(Json(state))
}

/// `PUT …?start=1` (a new sandbox no snapshot will be restored into): its init and egress proxy
/// start now, in the background, instead of under its first command — about 25 ms of bubblewrap
/// (`cargo xtask bench sandboxes`: the daemon alone). A failure here is left for that command to
/// meet and report; a sandbox deleted or replaced meanwhile is not started.
fn start_soon(registry: Arc<Registry>, sandbox: Arc<Sandbox>) {
    tokio::spawn(async move {
        let Ok(_shared) = sandbox.gate.shared().await else {
            return;
        };
        let current = registry.get(&sandbox.id).ok();
        if current.is_some_and(|current| Arc::ptr_eq(&current, &sandbox)) {
            let _ = registry.ensure_running(&sandbox).await;
        }
    });
}

async fn get_sandbox(Authorized(sandbox): Authorized) -> Result<impl IntoResponse> {
    Ok(Json(sandbox.state().await))
}

async fn delete_sandbox(
    State(app): AppState,
    Authorized(sandbox): Authorized,
) -> Result<StatusCode> {
    app.registry.delete(&sandbox.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn stop(Authorized(sandbox): Authorized) -> Result<impl IntoResponse> {
    sandbox.stop().await;
    Ok(Json(sandbox.state().await))
}

async fn get_snapshot(Authorized(sandbox): Authorized) -> Result<Response> {
    // Nothing may run while the workspace is packed: a process racing the walk could
    // otherwise swap a directory for a link out of the workspace.
    let _exclusive = sandbox.gate.exclusive().await?;
    sandbox.halt().await;
    let exported = sandbox.clone();
    let (file, size) = blocking(move || snapshot::export(&exported)).await?;
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    Ok((
        [
            (header::CONTENT_TYPE, "application/gzip".to_string()),
            (header::CONTENT_LENGTH, size.to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

async fn put_snapshot(Authorized(sandbox): Authorized, body: Body) -> Result<impl IntoResponse> {
    let archive = snapshot::receive(&sandbox, body.into_data_stream()).await?;
    // Nothing may run while the workspace is swapped.
    let _exclusive = sandbox.gate.exclusive().await?;
    sandbox.halt().await;
    let restoring = sandbox.clone();
    blocking(move || snapshot::restore(&restoring, archive.path())).await?;
    drop(_exclusive);
    Ok(Json(sandbox.state().await))
}

async fn exec_run(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(req): JsonBody<ExecRequest>,
) -> Result<impl IntoResponse> {
    Ok(Json(exec::run(&app.registry, &sandbox, &req).await?))
}

async fn desktop(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(action): JsonBody<handoff_wire::desktop::DesktopAction>,
) -> Result<impl IntoResponse> {
    Ok(Json(
        crate::desktop::act(&app.registry, &sandbox, action).await?,
    ))
}

async fn exec_stream(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(req): JsonBody<ExecRequest>,
) -> Result<Response> {
    let rx = exec::stream(app.registry.clone(), sandbox, req).await?;
    let lines = futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        let mut line = serde_json::to_vec(&event).unwrap_or_default();
        line.push(b'\n');
        Some((Ok::<_, std::convert::Infallible>(Bytes::from(line)), rx))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response())
}

async fn start_process(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(req): JsonBody<StartProcess>,
) -> Result<impl IntoResponse> {
    Ok(Json(processes::start(&app.registry, &sandbox, &req).await?))
}

async fn list_processes(Authorized(sandbox): Authorized) -> Result<impl IntoResponse> {
    Ok(Json(ProcessList {
        processes: sandbox.processes.list(),
    }))
}

async fn process_logs(
    Authorized(sandbox): Authorized,
    Path((_, pid)): Path<(String, u64)>,
) -> Result<impl IntoResponse> {
    Ok(Json(processes::logs(&sandbox, pid)?))
}

async fn kill_process(
    Authorized(sandbox): Authorized,
    Path((_, pid)): Path<(String, u64)>,
) -> Result<impl IntoResponse> {
    Ok(Json(processes::kill(&sandbox, pid).await?))
}

async fn freeze_process(
    Authorized(sandbox): Authorized,
    Path((_, pid)): Path<(String, u64)>,
) -> Result<impl IntoResponse> {
    Ok(Json(processes::set_frozen(&sandbox, pid, true).await?))
}

async fn thaw_process(
    Authorized(sandbox): Authorized,
    Path((_, pid)): Path<(String, u64)>,
) -> Result<impl IntoResponse> {
    Ok(Json(processes::set_frozen(&sandbox, pid, false).await?))
}

fn encoding(params: &HashMap<String, String>) -> Result<Encoding> {
    match params.get("encoding").map(String::as_str) {
        None | Some("text") | Some("utf-8") | Some("utf8") => Ok(Encoding::Text),
        Some("base64") => Ok(Encoding::Base64),
        Some(other) => Err(ApiError::bad_request(format!(
            "encoding {other:?} is not supported: use text or base64"
        ))),
    }
}

async fn read_file(
    Authorized(sandbox): Authorized,
    Query(params): Params,
) -> Result<impl IntoResponse> {
    let resolved = files::resolve(param(&params, "path")?)?;
    let encoding = encoding(&params)?;
    let cap = match params.get("max") {
        None => READ_CAP,
        Some(max) => max
            .parse::<u64>()
            .ok()
            .filter(|m| (1..=LARGE_READ_CAP).contains(m))
            .ok_or_else(|| {
                ApiError::bad_request(format!("max must be 1 to {LARGE_READ_CAP} bytes"))
            })?,
    };
    let _shared = sandbox.gate.shared().await?;
    let home = sandbox.home.clone();
    Ok(Json(
        blocking(move || files::read(&home, &resolved, encoding, cap)).await?,
    ))
}

async fn write_file(
    Authorized(sandbox): Authorized,
    headers: HeaderMap,
    Query(params): Params,
    body: Body,
) -> Result<impl IntoResponse> {
    let resolved = files::resolve(param(&params, "path")?)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(size) = declared.filter(|&s| s > WRITE_CAP) {
        return Err(files::write_too_large(size));
    }
    let mut bytes = Vec::new();
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?;
        if (bytes.len() + chunk.len()) as u64 > WRITE_CAP {
            return Err(files::write_too_large((bytes.len() + chunk.len()) as u64));
        }
        bytes.extend_from_slice(&chunk);
    }
    let _shared = sandbox.gate.shared().await?;
    let (home, owner) = (sandbox.home.clone(), sandbox.owner());
    Ok(Json(
        blocking(move || files::write(&home, owner, &resolved, &bytes)).await?,
    ))
}

async fn delete_file(Authorized(sandbox): Authorized, Query(params): Params) -> Result<StatusCode> {
    let resolved = files::resolve(param(&params, "path")?)?;
    let recursive = params
        .get("recursive")
        .is_some_and(|v| v == "true" || v == "1");
    let _shared = sandbox.gate.shared().await?;
    let home = sandbox.home.clone();
    blocking(move || files::delete(&home, &resolved, recursive)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_files(
    Authorized(sandbox): Authorized,
    Query(params): Params,
) -> Result<impl IntoResponse> {
    let resolved = files::resolve(params.get("path").map(String::as_str).unwrap_or(""))?;
    let _shared = sandbox.gate.shared().await?;
    let home = sandbox.home.clone();
    Ok(Json(blocking(move || files::list(&home, &resolved)).await?))
}

async fn mkdir(
    Authorized(sandbox): Authorized,
    Query(params): Params,
) -> Result<impl IntoResponse> {
    let resolved = files::resolve(param(&params, "path")?)?;
    let _shared = sandbox.gate.shared().await?;
    let (home, owner) = (sandbox.home.clone(), sandbox.owner());
    Ok(Json(
        blocking(move || files::mkdir(&home, owner, &resolved)).await?,
    ))
}

async fn zip_dir(Authorized(sandbox): Authorized, Query(params): Params) -> Result<Response> {
    let resolved = files::resolve(params.get("path").map(String::as_str).unwrap_or(""))?;
    let _shared = sandbox.gate.shared().await?;
    let home = sandbox.home.clone();
    let bytes = blocking(move || crate::zipdir::zip_dir(&home, &resolved)).await?;
    Ok(([(header::CONTENT_TYPE, "application/zip")], bytes).into_response())
}

async fn git_clone(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(req): JsonBody<GitClone>,
) -> Result<impl IntoResponse> {
    Ok(Json(git::clone(&app.registry, &sandbox, &req).await?))
}

async fn git_checkout(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    JsonBody(req): JsonBody<GitCheckout>,
) -> Result<impl IntoResponse> {
    Ok(Json(git::checkout(&app.registry, &sandbox, &req).await?))
}

async fn list_ports(
    State(app): AppState,
    Authorized(sandbox): Authorized,
) -> Result<impl IntoResponse> {
    Ok(Json(PortList {
        ports: ports::list(&app.registry, &sandbox).await?,
    }))
}

async fn preview_root(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    Path((_, port)): Path<(String, u16)>,
    req: Request<Body>,
) -> Result<Response> {
    forward(app, sandbox, port, String::new(), req).await
}

async fn preview(
    State(app): AppState,
    Authorized(sandbox): Authorized,
    Path((_, port, path)): Path<(String, u16, String)>,
    req: Request<Body>,
) -> Result<Response> {
    forward(app, sandbox, port, path, req).await
}

async fn forward(
    app: Arc<App>,
    sandbox: Arc<Sandbox>,
    port: u16,
    path: String,
    req: Request<Body>,
) -> Result<Response> {
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let target = format!("/{path}{query}");
    ports::proxy(&app.registry, &sandbox, port, &target, req).await
}

async fn egress_log(
    Authorized(sandbox): Authorized,
    Query(params): Params,
) -> Result<impl IntoResponse> {
    let limit = match params.get("limit") {
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ApiError::bad_request("limit must be between 1 and 1000"))?,
        None => 100,
    };
    let verdict = match params.get("verdict").map(String::as_str) {
        None => None,
        Some("allowed") => Some(Verdict::Allowed),
        Some("blocked") => Some(Verdict::Blocked),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "verdict {other:?} is not allowed or blocked"
            )))
        }
    };
    Ok(Json(EgressLog {
        entries: sandbox.egress.read(limit, verdict),
    }))
}

#[cfg(test)]
mod tests;
