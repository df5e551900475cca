//! Sandbox ↔ host through snapshots: pausing packs the workspace only after the sandbox's
//! processes are stopped, walking it without following links, so a process racing the walk
//! (swapping a directory for a link to the host) gets no host file into the snapshot; FIFOs do
//! not hang it.

use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

const CANARY: &str = "host-canary-7f3a9c2e";

#[tokio::test]
async fn a_symlink_race_during_pause_packs_no_host_file() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let id = mcp.call_ok("sandbox_create", json!({})).await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    // A host directory shaped like the one in the workspace, full of canaries.
    let canary = handoff_tests::scratch_dir("canary");
    for i in 0..400 {
        std::fs::write(canary.join(format!("f{i:04}")), CANARY).unwrap();
    }
    let swap = format!(
        "mkdir -p d && for i in $(seq -w 0 399); do echo inside > d/f$i; done && mkfifo pipe && \
         (setsid sh -c 'while :; do mv d d.real && ln -s {} d && rm d && mv d.real d; done' > /dev/null 2>&1 < /dev/null &) && sleep 0.3 && echo racing",
        canary.display()
    );
    let started = mcp
        .call_ok("sandbox_exec", json!({"sandboxId": id, "command": swap}))
        .await;
    assert_eq!(started["stdout"], "racing\n", "{started}");
    for _ in 0..5 {
        let paused = tokio::time::timeout(
            Duration::from_secs(60),
            mcp.call_ok("sandbox_pause", json!({"sandboxId": id})),
        )
        .await
        .expect("pausing hung (a FIFO in the workspace?)");
        assert_eq!(paused["status"], "paused", "{paused}");
        // Resuming restores the snapshot: nothing of the host may be in it.
        let found = mcp
            .call_ok(
                "sandbox_exec",
                json!({"sandboxId": id, "command": format!("grep -rl {CANARY} . 2>/dev/null | head; find . -name 'f[0-9]*' -type f | wc -l")}),
            )
            .await;
        let text = found["stdout"].as_str().unwrap();
        assert!(!text.contains('/'), "host files were packed: {text}");
        assert_eq!(text.trim(), "400", "the workspace itself survives: {found}");
        // The racer was stopped before the walk; start it again for the next round.
        mcp.call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": format!("(setsid sh -c 'while :; do mv d d.real && ln -s {} d && rm d && mv d.real d; done' > /dev/null 2>&1 < /dev/null &); sleep 0.3", canary.display())}),
        )
        .await;
    }
}
