//! The OAuth benchmark: what signing in costs (registration, consent, code exchange), what a
//! refresh costs, and what an OAuth access token adds to every MCP call over a static API token
//! (its check in the OAuth store is one more Durable Object round trip).

use crate::stats::{measure, report};
use handoff_tests::oauth::{post_form, register_public, sign_in};
use handoff_tests::{Mcp, Worker, WorkerOptions};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

const SIGN_INS: usize = 30;
const SAMPLES: usize = 400;

pub async fn run() {
    // The default limits would stop a benchmark registering dozens of clients from one address.
    let worker = Worker::start(
        WorkerOptions::default().var("HANDOFF_RATE_LIMITS", "register=1000/60,token=1000/60"),
    );
    let base = worker.url("");

    println!("\n== OAuth sign-in (register, consent page, approve, code exchange) ==");
    let mut sign_in_ms = Vec::new();
    let mut tokens = None;
    for i in 0..SIGN_INS {
        let started = Instant::now();
        let client_id = register_public(&base, &format!("bench {i}")).await;
        let issued = sign_in(&base, &client_id).await;
        sign_in_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        tokens = Some((client_id, issued));
    }
    sign_in_ms.sort_by(f64::total_cmp);
    println!(
        "whole sign-in, {SIGN_INS} clients: p50 {:.1} ms, max {:.1} ms (5 HTTP requests each)",
        sign_in_ms[SIGN_INS / 2],
        sign_in_ms[SIGN_INS - 1]
    );
    let (client_id, mut issued) = tokens.expect("signed in");

    let mut refresh_ms = Vec::new();
    for _ in 0..SIGN_INS {
        let started = Instant::now();
        let refreshed = post_form(
            &base,
            "/oauth/token",
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", issued.refresh.as_deref().expect("refresh")),
                ("client_id", &client_id),
            ],
        )
        .await;
        refresh_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        issued = handoff_tests::oauth::Tokens::from(&refreshed);
    }
    refresh_ms.sort_by(f64::total_cmp);
    println!(
        "refresh with rotation: p50 {:.2} ms, max {:.2} ms",
        refresh_ms[SIGN_INS / 2],
        refresh_ms[SIGN_INS - 1]
    );

    println!("\n== An MCP call with each kind of credential ==");
    println!(
        "{:<34} {:>8} {:>8} {:>9}",
        "call", "p50 ms", "p99 ms", "req/s"
    );
    let with_api_token = Arc::new(Mcp::connect(&base).await);
    let with_oauth = Arc::new(Mcp::connect_as(&base, &issued.access, "2025-11-25").await);
    let list = |mcp: Arc<Mcp>| async move {
        mcp.call_ok("opencode_list_runs", json!({"limit": 1})).await;
    };
    let api = measure(&with_api_token, 1, SAMPLES, list).await;
    report("list_runs, API token", &api);
    let oauth = measure(&with_oauth, 1, SAMPLES, list).await;
    report("list_runs, OAuth access token", &oauth);
    println!(
        "an OAuth access token adds {:.2} ms at p50 (its check in the OAuth store)",
        oauth.p50 - api.p50
    );
}
