//! What the sandbox daemon holds its sandboxes to: the memory and process limits of each
//! sandbox's cgroup, and who goes first when memory runs out.

use crate::daemon_api::{client_for, daemon};
use serde_json::json;
use std::time::Duration;

/// The limits a sandbox is given hold for the commands it runs: each joins the sandbox's cgroup
/// (on cgroup v1 through `tasks`, by itself, between fork and exec).
#[tokio::test]
async fn commands_cannot_exceed_their_sandboxs_memory_or_process_limits() {
    let c = client_for(daemon(), "limits-hold");
    let limits = json!({"limits": {"memory_bytes": 64u64 << 20, "pids": 32}});
    let created = c.send(reqwest::Method::PUT, "", Some(limits)).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let enforced = &created.json()["isolation"]["limits"];
    assert_eq!(enforced["memory_bytes"], 64u64 << 20, "{enforced}");
    assert_eq!(enforced["pids"], 32, "{enforced}");
    // tail keeps a line without an end in memory: 300 MB of one.
    let hog = c
        .exec(
            "head -c 300000000 /dev/zero | tail -n 1 >/dev/null; echo \"tail: $?\"",
            60_000,
        )
        .await;
    assert!(
        !hog["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("tail: 0"),
        "300 MB fit a 64 MiB sandbox: {hog}"
    );
    let forks = c
        .exec(
            // A subshell forks until it cannot (dash then gives up on it); the processes are
            // counted by the shell itself, a glob and a builtin, since no fork is left to count
            // with.
            "(for i in $(seq 60); do sleep 2 >/dev/null 2>&1 & done) 2>/dev/null; set -- /proc/[0-9]*; echo \"running: $#\"",
            60_000,
        )
        .await;
    let running: u64 = forks["stdout"]
        .as_str()
        .and_then(|s| s.trim().strip_prefix("running: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        running <= 32,
        "more processes than the limit of 32: {forks}"
    );
}

/// A frozen process (a kept agent waiting for its session's next run) is what the OOM killer
/// takes when a sandbox runs out of memory — not the command that is working. Here a frozen
/// process holds 30 MB of a 64 MiB sandbox and a command then needs 50 MB: the frozen one goes
/// and the command completes. Were the frozen process not marked, the kernel would take the
/// bigger one, the command.
#[tokio::test]
async fn when_a_sandbox_runs_out_of_memory_a_frozen_process_goes_before_a_working_command() {
    let c = client_for(daemon(), "oom-frozen-first");
    let limits = json!({"limits": {"memory_bytes": 64u64 << 20}});
    let created = c.send(reqwest::Method::PUT, "", Some(limits)).await;
    assert_eq!(created.status, 200, "{}", created.body);
    if created.json()["isolation"]["limits"]["memory_bytes"] != json!(64u64 << 20) {
        panic!("this host enforces no memory limit: {}", created.body);
    }
    // tail keeps the line without an end in memory while the pipe stays open.
    let held = c
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "{ head -c 30000000 /dev/zero; sleep 600; } | tail -n 1"})),
        )
        .await;
    assert_eq!(held.status, 200, "{}", held.body);
    let id = held.json()["id"].as_u64().expect("process id");
    // Until tail holds the 30 MB (its resident size, read inside the sandbox).
    let rss_of_tail = "for s in /proc/[0-9]*/status; do \
        grep -q '^Name:[[:space:]]*tail$' \"$s\" && grep '^VmRSS' \"$s\"; done";
    let mut held_kb = 0u64;
    for _ in 0..100 {
        let probe = c.exec(rss_of_tail, 10_000).await;
        held_kb = probe["stdout"]
            .as_str()
            .and_then(|s| s.split_whitespace().nth(1))
            .and_then(|kb| kb.parse().ok())
            .unwrap_or(0);
        if held_kb > 28_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        held_kb > 28_000,
        "the held 30 MB never showed: {held_kb} kB"
    );
    let frozen = c
        .send(
            reqwest::Method::POST,
            &format!("/processes/{id}/freeze"),
            None,
        )
        .await;
    assert_eq!(frozen.status, 200, "{}", frozen.body);

    let working = c
        .exec("head -c 50000000 /dev/zero | tail -n 1 | wc -c", 60_000)
        .await;
    assert_eq!(
        working["exit_code"], 0,
        "the working command was killed: {working}"
    );
    assert_eq!(
        working["stdout"].as_str().map(str::trim),
        Some("50000000"),
        "{working}"
    );
    // The OOM killer took the frozen process's biggest member; the rest of it, still
    // stopped, is ended when it is thawed, and says so.
    let thawed = c
        .send(
            reqwest::Method::POST,
            &format!("/processes/{id}/thaw"),
            None,
        )
        .await;
    assert_eq!(thawed.status, 200, "{}", thawed.body);
    assert_eq!(
        (&thawed.json()["running"], &thawed.json()["frozen"]),
        (&json!(false), &json!(false)),
        "the frozen process outlived the shortage: {}",
        thawed.body
    );
    let deleted = c.send(reqwest::Method::DELETE, "", None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
}
