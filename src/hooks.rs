//! Worker webhooks: `POST /hooks/<worker>/<hook id>`. The URL is half the credential (the hook
//! id is random), the signature the other half (`workers::webhook`: GitHub's form or handoff's
//! timestamped one, with the secret derived for this worker and hook). In order: method, shape
//! of the URL, body size (256 KiB), signature — all before any storage is touched — then the
//! payload to R2, the worker's own checks (webhooks on, inputs), and the run, whose idempotency
//! key is the delivery: a replayed delivery starts nothing and gets 409. Every refusal is a 4xx
//! with a JSON body saying why.

use crate::artifacts;
use crate::error::{ErrorKind, Result};
use crate::http;
use crate::ids;
use crate::ledger::api::{CreateRun, Ledger};
use crate::links;
use crate::mac;
use crate::registry::api::{self as registry, PrepareRun};
use crate::time::now_ms;
use crate::workers::manifest::is_worker_name;
use crate::workers::webhook::{self, Headers, MAX_BODY};
use crate::workers::Trigger;
use serde_json::{json, Value};
use worker::{Env, Method, Request, Response};

pub async fn handle(mut req: Request, env: &Env) -> Result<Response> {
    if req.method() != Method::Post {
        return Ok(refuse(405, "method_not_allowed", "webhooks take POST"));
    }
    let path = req.path();
    let mut parts = path.trim_start_matches("/hooks/").split('/');
    let (Some(worker), Some(hook_id), None) = (parts.next(), parts.next(), parts.next()) else {
        return Ok(unknown());
    };
    if !is_worker_name(worker) || !ids::is_valid(ids::HOOK, hook_id) {
        return Ok(unknown());
    }
    let (worker, hook_id) = (worker.to_string(), hook_id.to_string());
    let Some(body) = http::read_capped(&mut req, MAX_BODY).await? else {
        return Ok(refuse(
            413,
            "too_large",
            &format!("webhook bodies are limited to {MAX_BODY} bytes (256 KiB)"),
        ));
    };
    let Some(secret) = links::webhook_secret(env, &worker, &hook_id) else {
        return Ok(refuse(
            503,
            "not_configured",
            "webhooks need HANDOFF_SIGNING_KEY on this deployment",
        ));
    };
    let headers = signature_headers(&req);
    let delivery = match webhook::verify(
        &headers,
        &body,
        now_ms() / 1000,
        |message| mac::hmac_hex(secret.as_bytes(), message),
        mac::same,
    ) {
        Ok(delivery) => delivery,
        Err(refusal) => return Ok(refuse(refusal.status(), "unauthorized", &refusal.message())),
    };
    let payload: Value = if body.is_empty() {
        Value::Object(Default::default())
    } else {
        match serde_json::from_slice(&body) {
            Ok(value) => value,
            Err(_) => return Ok(refuse(415, "not_json", "webhook bodies must be JSON")),
        }
    };
    let delivery_hash = mac::sha256_hex(delivery.id.as_bytes());
    let key = artifacts::webhook_key(&worker, &delivery_hash);
    let stored = json!({"event": delivery.event, "delivery": delivery.id, "payload": payload});
    env.bucket(artifacts::BUCKET)?
        .put(&key, worker::Data::Text(stored.to_string()))
        .execute()
        .await?;
    let op = PrepareRun {
        name: worker.clone(),
        version: None,
        trigger: Trigger::Webhook,
        inputs: payload.as_object().cloned().unwrap_or_default(),
        files: Vec::new(),
        replay_of: None,
        hook_id: Some(hook_id),
        webhook_key: Some(key),
    };
    let prepared = match registry::client(env)?.call(op).await {
        Ok(prepared) => prepared,
        Err(e) if e.kind == ErrorKind::NotFound => return Ok(unknown()),
        Err(e) if e.kind == ErrorKind::InvalidInput => {
            return Ok(refuse(422, "invalid_inputs", &e.message))
        }
        Err(e) => return Err(e),
    };
    let model = prepared.manifest.model.clone().or_else(|| {
        (prepared.manifest.runtime == crate::workers::Runtime::Skill)
            .then(|| crate::config::default_model(env))
    });
    let spec = crate::runs::RunSpec::for_worker(
        prepared.spec,
        &prepared.manifest.title,
        model,
        Some(format!("webhook:{worker}:{delivery_hash}")),
        prepared
            .origin
            .clone()
            .or_else(|| Some(http::base_url(env, &req))),
    );
    let created = Ledger::get(env)?
        .call(CreateRun {
            principal: prepared.owner,
            spec,
            task_ttl_ms: None,
        })
        .await?;
    if created.deduplicated {
        let message = format!(
            "delivery {:?} was already received (run {}); a replay starts nothing",
            delivery.id, created.run.id
        );
        return Ok(http::json(
            409,
            &json!({"error": "replayed", "message": message, "runId": created.run.id}),
        ));
    }
    Ok(http::json(
        202,
        &json!({"runId": created.run.id, "worker": worker, "status": created.run.status}),
    ))
}

fn signature_headers(req: &Request) -> Headers {
    let get = |name: &str| req.headers().get(name).ok().flatten();
    Headers {
        handoff_signature: get("x-handoff-signature"),
        handoff_timestamp: get("x-handoff-timestamp"),
        handoff_delivery: get("x-handoff-delivery"),
        github_signature: get("x-hub-signature-256"),
        github_delivery: get("x-github-delivery"),
        github_event: get("x-github-event"),
    }
}

/// The same answer for a worker that does not exist, a wrong hook id and a worker without
/// webhooks, so the URL reveals nothing.
fn unknown() -> Response {
    refuse(404, "not_found", "no such webhook")
}

fn refuse(status: u16, error: &str, message: &str) -> Response {
    http::json(status, &json!({"error": error, "message": message}))
}
