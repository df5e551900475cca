//! Figures for what a sandbox offers beyond exec: a template against running its setup again,
//! a fork, and the desktop's screenshot round trip — on the local daemon, through the whole
//! stack (MCP → Worker → sandbox object → daemon).

use crate::lifecycle::p50;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A setup that works offline and takes a while: the Python standard library copied into the
/// workspace and byte-compiled (about 60 MB of files).
const SETUP: &str = "cp -r /usr/lib/python3.11 lib && python3 -m compileall -q -j 2 lib >/dev/null";
const CHECK: &str = "test -f lib/json/__pycache__/__init__.cpython-311.pyc && du -sm lib | cut -f1";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

async fn exec(mcp: &Mcp, id: &str, command: &str) -> Value {
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": command, "timeoutMs": 600000}),
        )
        .await;
    assert_eq!(out["exitCode"], 0, "{command}: {out:#}");
    out
}

async fn create(mcp: &Mcp, arguments: Value) -> String {
    mcp.call_ok("sandbox_create", arguments).await["sandboxId"]
        .as_str()
        .expect("sandboxId")
        .to_string()
}

pub async fn run(mcp: &Mcp) {
    println!("\n== Templates, forks and the desktop (local daemon) ==");
    // The setup run again, in a fresh sandbox.
    let started = Instant::now();
    let fresh = create(mcp, json!({})).await;
    let size = exec(mcp, &fresh, &format!("{SETUP} && {CHECK}")).await["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    let setup_again = ms(started);

    // The same setup as a template, then sandboxes from it.
    let name = format!("bench-{}", std::process::id());
    let started = Instant::now();
    mcp.call_ok(
        "sandbox_template_create",
        json!({"name": name, "setup": [SETUP]}),
    )
    .await;
    let build = loop {
        let listed = mcp.call_ok("sandbox_template_list", json!({})).await;
        let template = listed["templates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == json!(name))
            .cloned()
            .expect("the template");
        match template["status"].as_str() {
            Some("building") => tokio::time::sleep(Duration::from_millis(250)).await,
            Some("ready") => break (ms(started), template["bytes"].as_i64().unwrap_or(0)),
            other => panic!("template {other:?}: {template:#}"),
        }
    };
    let mut from_template = Vec::new();
    let mut made = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let id = create(mcp, json!({"template": name})).await;
        exec(mcp, &id, CHECK).await;
        from_template.push(ms(started));
        made.push(id);
    }
    let template_ready = p50(&mut from_template);
    println!(
        "setup run again in a new sandbox: {setup_again:.0} ms ({size} MB workspace); as a \
         template: built in {:.0} ms ({:.1} MB snapshot); sandbox_create {{template}} → first \
         command done p50 {template_ready:.0} ms over 3 — {:.1}× faster than the setup",
        build.0,
        build.1 as f64 / 1048576.0,
        setup_again / template_ready
    );

    // A fork of that workspace.
    let mut forks = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let fork = mcp
            .call_ok("sandbox_fork", json!({"sandboxId": fresh}))
            .await;
        let id = fork["sandboxId"].as_str().expect("sandboxId").to_string();
        exec(mcp, &id, CHECK).await;
        forks.push(ms(started));
        made.push(id);
    }
    println!(
        "sandbox_fork of a running sandbox with that workspace → first command in the fork done \
         p50 {:.0} ms over 3",
        p50(&mut forks)
    );

    // The desktop: the first screenshot starts it; later ones are a round trip.
    let started = Instant::now();
    mcp.call_ok(
        "sandbox_computer",
        json!({"sandboxId": fresh, "action": "screenshot"}),
    )
    .await;
    let first = ms(started);
    let mut shots = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        mcp.call_ok(
            "sandbox_computer",
            json!({"sandboxId": fresh, "action": "screenshot"}),
        )
        .await;
        shots.push(ms(started));
    }
    let mut clicks = Vec::new();
    for i in 0..5 {
        let started = Instant::now();
        mcp.call_ok(
            "sandbox_computer",
            json!({"sandboxId": fresh, "action": "click", "x": 100 + i, "y": 100}),
        )
        .await;
        clicks.push(ms(started));
    }
    println!(
        "sandbox_computer (1280×800): first screenshot (starts the desktop) {first:.0} ms; \
         screenshot p50 {:.0} ms over 10; click (+200 ms settle) and screenshot p50 {:.0} ms over 5",
        p50(&mut shots),
        p50(&mut clicks)
    );

    made.push(fresh);
    for id in made {
        mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
            .await;
    }
    mcp.call_ok("sandbox_template_delete", json!({"name": name}))
        .await;
}
