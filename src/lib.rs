//! handoff: the Cloudflare Worker entry point. This file only routes requests to the modules
//! that own them; see ARCHITECTURE.md for the code map.

// The `bundle-*` features build a wasm that is never served, only weighed (`cargo xtask bench
// bundle-split`): what is left out there is not dead in the real build.
#![cfg_attr(
    any(
        feature = "bundle-front",
        feature = "bundle-objects",
        feature = "bundle-one-tool"
    ),
    allow(dead_code, unused_imports)
)]

mod artifacts;
mod auth;
mod authstore;
mod budget;
mod callbacks;
mod config;
mod cookies;
mod diff;
mod error;
mod forge;
#[cfg(test)]
mod fuzz;
mod hooks;
mod html;
mod http;
mod ids;
mod json_cost;
mod json_path;
mod jwt;
mod ledger;
mod links;
mod mac;
mod markdown;
mod mcp;
mod mcp_session_ids;
mod names;
mod oauth;
mod outputs;
mod page;
mod preview;
mod principal;
mod proxy;
mod recent;
mod registry;
mod repository;
mod rpc;
mod run_views;
mod runs;
mod sandbox;
mod sandboxes;
mod seal;
mod session;
mod suggest;
mod templates;
mod time;
mod tokens;
mod tools;
mod transcript;
mod urls;
mod workers;

pub use authstore::AuthStoreObject;
pub use ledger::RunLedger;
pub use registry::WorkerRegistry;
pub use sandbox::SandboxObject;
pub use session::WorkSession;

use worker::{event, Context, Env, Method, Request, Response, Result};

#[cfg_attr(not(feature = "bundle-objects"), event(fetch))]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    // A preview origin serves its sandbox's port and nothing of handoff's.
    if let Some(host) = preview::preview_host(&req, &env) {
        let outcome = preview::handle(req, &env, &host).await;
        return outcome.or_else(|e| Ok(http::internal_error(&e)));
    }
    let path = req.path();
    let outcome: error::Result<Response> = match (req.method(), path.as_str()) {
        (Method::Get | Method::Head, "/health") => http::health(&env),
        (_, "/mcp") => mcp::handle(req, &env).await,
        (_, p) if oauth::is_oauth_path(p) => oauth::handle(req, &env).await,
        (Method::Get, p) if p.starts_with("/runs/") || p.starts_with("/sessions/") => {
            page::get(req, &env).await
        }
        (Method::Post, p) if p.starts_with("/runs/") => page::post(req, &env).await,
        (Method::Get, "/secrets") => page::secrets::get(req, &env).await,
        (Method::Post, p) if p.starts_with("/secrets/") => page::secrets::post(req, &env).await,
        (Method::Get, p) if p.starts_with("/outputs/") => outputs::handle(req, &env).await,
        (_, p) if p.starts_with("/hooks/") => hooks::handle(req, &env).await,
        (_, p) if p.starts_with("/preview/") => Ok(preview::moved()),
        (_, p) if p.starts_with("/proxy/") => proxy::handle(req, &env).await,
        (Method::Get, "/") => http::index(),
        _ => Ok(http::not_found(&path)),
    };
    // Every error already has its own response; anything left over is reported, never leaked.
    outcome.or_else(|e| Ok(http::internal_error(&e)))
}
