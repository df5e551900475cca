//! Sandbox templates through the whole local stack: a template built from setup commands in the
//! background (its status moving from building to ready), sandboxes that start from it with its
//! files, tools and settings, a setup that fails saying why, a template copied from a sandbox,
//! and deletion.

use handoff_tests::oauth::random;
use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn mcp() -> Mcp {
    Mcp::connect(&with_sandboxes().1.url("")).await
}

fn unique(prefix: &str) -> String {
    let tail: String = random(12)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
    format!("{prefix}-{}", tail.to_ascii_lowercase())
}

/// The template as listed, once it is no longer building.
async fn settled(mcp: &Mcp, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let listed = mcp.call_ok("sandbox_template_list", json!({})).await;
        let template = listed["templates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == json!(name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not listed: {listed:#}"));
        if template["status"] != "building" {
            return template;
        }
        assert!(Instant::now() < deadline, "still building: {template:#}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn exec(mcp: &Mcp, id: &str, command: &str) -> Value {
    mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": command}))
        .await
}

#[tokio::test]
async fn a_template_built_from_setup_starts_sandboxes_ready() {
    let mcp = mcp().await;
    let name = unique("py");
    let setup = [
        "python3 -m venv --without-pip .venv",
        ".venv/bin/python -c 'open(\"made.txt\", \"w\").write(\"made by setup\")'",
        "mkdir -p bin && printf '#!/bin/sh\\necho tool says $GREETING\\n' > bin/hello && chmod +x bin/hello",
    ];
    let started = Instant::now();
    let created = mcp
        .call_ok(
            "sandbox_template_create",
            json!({"name": name, "description": "a venv and a tool", "setup": setup,
                   "env": {"GREETING": "hi"}, "size": "medium"}),
        )
        .await;
    assert_eq!(created["status"], "building", "{created:#}");
    let build = created["buildSandboxId"].as_str().unwrap().to_string();
    let ready = settled(&mcp, &name).await;
    let built_in = started.elapsed();
    assert_eq!(ready["status"], "ready", "{ready:#}");
    assert!(ready["bytes"].as_i64().unwrap() > 0, "{ready:#}");
    assert_eq!(ready["size"], "medium");
    assert_eq!(ready["envNames"], json!(["GREETING"]));
    assert!(ready["buildSeconds"].as_f64().is_some(), "{ready:#}");
    // The build sandbox is gone once its work is kept.
    let error = mcp
        .call_err("sandbox_info", json!({"sandboxId": build}))
        .await;
    assert!(
        error.contains("deleted") || error.contains("not found"),
        "{error}"
    );

    // A sandbox from the template has the files and tools, and the template's settings.
    let t = Instant::now();
    let sandbox = mcp
        .call_ok(
            "sandbox_create",
            json!({"template": name, "env": {"EXTRA": "x"}}),
        )
        .await;
    let id = sandbox["sandboxId"].as_str().unwrap().to_string();
    let out = exec(
        &mcp,
        &id,
        "cat made.txt; echo; bin/hello; .venv/bin/python -c 'import sys; print(sys.prefix)'; echo $EXTRA",
    )
    .await;
    let from_template = t.elapsed();
    assert_eq!(
        out["stdout"], "made by setup\ntool says hi\n/home/sandbox/.venv\nx\n",
        "{out:#}"
    );
    assert_eq!(sandbox["size"], "medium", "{sandbox:#}");
    assert_eq!(sandbox["metadata"]["template"], json!(name));
    eprintln!(
        "template {name}: built in {built_in:?} (build {}s); a sandbox from it answered its first command in {from_template:?}",
        ready["buildSeconds"]
    );

    // A name in use is refused; bad arguments name what is wrong.
    for (args, needle) in [
        (json!({"name": name, "setup": ["true"]}), "already exists"),
        (
            json!({"name": "Bad Name", "setup": ["true"]}),
            "template name",
        ),
        (json!({"name": unique("x")}), "either"),
        (json!({"name": unique("x"), "setup": []}), "setup"),
        (
            json!({"name": unique("x"), "setup": ["true"], "fromSandboxId": id}),
            "either",
        ),
    ] {
        let error = mcp.call_err("sandbox_template_create", args.clone()).await;
        assert!(error.contains(needle), "{args}: {error}");
    }

    // Deleted: no longer listed, and sandboxes cannot start from it; this one keeps its files.
    mcp.call_ok("sandbox_template_delete", json!({"name": name}))
        .await;
    let error = mcp
        .call_err("sandbox_create", json!({"template": name}))
        .await;
    assert!(error.contains("no template"), "{error}");
    let out = exec(&mcp, &id, "cat made.txt").await;
    assert_eq!(out["stdout"], "made by setup");
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

#[tokio::test]
async fn a_failing_setup_says_why_and_a_sandbox_can_become_a_template() {
    let mcp = mcp().await;
    let name = unique("broken");
    mcp.call_ok(
        "sandbox_template_create",
        json!({"name": name, "setup": ["echo preparing", "echo about to fail >&2; exit 3", "touch never"]}),
    )
    .await;
    let failed = settled(&mcp, &name).await;
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("code 3") && error.contains("about to fail"),
        "{error}"
    );
    assert!(error.contains("step 2 of 3"), "{error}");
    let refused = mcp
        .call_err("sandbox_create", json!({"template": name}))
        .await;
    assert!(refused.contains("failed"), "{refused}");
    // A failed template's name can be used again.
    mcp.call_ok(
        "sandbox_template_create",
        json!({"name": name, "setup": ["echo fixed > fixed.txt"]}),
    )
    .await;
    assert_eq!(settled(&mcp, &name).await["status"], "ready");
    mcp.call_ok("sandbox_template_delete", json!({"name": name}))
        .await;

    // From a sandbox as it is: ready at once, with its files and rules.
    let source = mcp
        .call_ok("sandbox_create", json!({"allowOut": ["example.com"]}))
        .await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    exec(&mcp, &source, "echo from the source > kept.txt").await;
    let copied = unique("copy");
    let template = mcp
        .call_ok(
            "sandbox_template_create",
            json!({"name": copied, "fromSandboxId": source}),
        )
        .await;
    assert_eq!(template["status"], "ready", "{template:#}");
    assert_eq!(template["fromSandboxId"], json!(source));
    assert_eq!(template["allowOut"], json!(["example.com"]));
    exec(&mcp, &source, "echo changed later > kept.txt").await;
    let made = mcp
        .call_ok("sandbox_create", json!({"template": copied}))
        .await;
    let id = made["sandboxId"].as_str().unwrap().to_string();
    assert_eq!(made["allowOut"], json!(["example.com"]), "{made:#}");
    let out = exec(&mcp, &id, "cat kept.txt").await;
    assert_eq!(out["stdout"], "from the source\n", "{out:#}");
    for sandbox in [&id, &source] {
        mcp.call_ok("sandbox_delete", json!({"sandboxId": sandbox}))
            .await;
    }
    mcp.call_ok("sandbox_template_delete", json!({"name": copied}))
        .await;
}

#[tokio::test]
async fn a_sandbox_from_a_template_outlives_the_template() {
    let mut daemon = handoff_tests::daemon::Daemon::start();
    let worker =
        handoff_tests::Worker::start(handoff_tests::WorkerOptions::default().daemon(&daemon));
    let mcp = Mcp::connect(&worker.url("")).await;
    let name = unique("kept");
    mcp.call_ok(
        "sandbox_template_create",
        json!({"name": name, "setup": ["echo kept > kept.txt"]}),
    )
    .await;
    assert_eq!(settled(&mcp, &name).await["status"], "ready");
    let id = mcp
        .call_ok("sandbox_create", json!({"template": name}))
        .await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    // Soon after it starts, the sandbox holds a snapshot of its own.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
        if info["snapshot"]["bytes"].is_number() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot of its own: {info:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The template goes, then the daemon loses the sandbox's files: they come back all the same.
    mcp.call_ok("sandbox_template_delete", json!({"name": name}))
        .await;
    daemon.stop();
    handoff_tests::remove_scratch(&daemon.sandboxes().join(&id));
    daemon.restart();
    assert_eq!(exec(&mcp, &id, "cat kept.txt").await["stdout"], "kept\n");
}
