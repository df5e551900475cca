//! Containers come and go under a sandbox: pausing snapshots the workspace to R2 and removes
//! the container, resuming starts a new one and restores the files, and a container that dies
//! (its host fails, the engine kills it) is replaced on the next call, with the last snapshot —
//! while a command it was running fails promptly instead of hanging; a sandbox whose container
//! is gone pauses with the snapshot it had. Inside, processes a command left behind are reaped
//! when they end (no zombie piles up over a container's life), and a stop ends them all, even
//! one in a session of its own.

use crate::{create, exec, exec_after_loss, mcp, stdout};
use handoff_tests::containers::{container_of, wait_gone};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn pausing_removes_the_container_and_resuming_restores_the_files() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    exec(
        &mcp,
        &id,
        "mkdir -p src/deep && echo kept > src/deep/file.txt && chmod 755 src/deep/file.txt \
         && ln -s deep/file.txt src/link && head -c 100000 /dev/urandom > blob.bin \
         && sha256sum blob.bin > blob.sum",
    )
    .await;
    let before = container_of(&id);
    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused", "{paused:#}");
    assert!(
        wait_gone(&id, Duration::from_secs(30)),
        "a paused sandbox has no container"
    );

    let resumed = mcp
        .call_ok("sandbox_resume", json!({"sandboxId": id}))
        .await;
    assert_eq!(resumed["status"], "running", "{resumed:#}");
    let after = container_of(&id);
    assert_ne!(after.id, before.id, "a new container");
    let out = exec(
        &mcp,
        &id,
        "cat src/link; stat -c %a src/deep/file.txt; sha256sum -c blob.sum",
    )
    .await;
    assert_eq!(stdout(&out), "kept\n755\nblob.bin: OK\n", "{out}");
}

#[tokio::test]
async fn a_lost_container_is_replaced_with_the_last_snapshot() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    exec(&mcp, &id, "echo snapshotted > a.txt").await;
    mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    exec(&mcp, &id, "echo after-the-snapshot > b.txt").await;
    let lost = container_of(&id);
    lost.kill();
    let started = Instant::now();
    let out = exec_after_loss(&mcp, &id, "cat a.txt; ls").await;
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "replaced in {:?}",
        started.elapsed()
    );
    assert_eq!(stdout(&out), "snapshotted\na.txt\n", "{out}");
    assert_ne!(container_of(&id).id, lost.id);
}

#[tokio::test]
async fn a_command_whose_container_dies_fails_promptly() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    exec(&mcp, &id, "true").await;
    let container = container_of(&id);
    let started = Instant::now();
    let running = {
        let mcp = mcp.reconnected();
        let id = id.clone();
        tokio::spawn(async move {
            mcp.call(
                "sandbox_exec",
                json!({"sandboxId": id, "command": "echo started; sleep 120", "timeoutMs": 180000}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    container.kill();
    let result = tokio::time::timeout(Duration::from_secs(90), running)
        .await
        .expect("the command does not hang when its container dies")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "{:?}",
        started.elapsed()
    );
    let result = &result["result"];
    assert_eq!(result["isError"], true, "{result:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("sandbox") || text.contains("container"),
        "a clear reason: {text}"
    );
    // The sandbox itself carries on in a new container.
    assert_eq!(stdout(&exec(&mcp, &id, "echo back").await), "back\n");
}

#[tokio::test]
async fn a_sandbox_whose_container_is_gone_pauses_with_its_last_snapshot() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    exec(&mcp, &id, "echo first > a.txt").await;
    mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    mcp.call_ok("sandbox_resume", json!({"sandboxId": id}))
        .await;
    exec(&mcp, &id, "echo later > b.txt").await;
    let lost = container_of(&id);
    lost.kill();
    assert!(
        wait_gone(&id, Duration::from_secs(30)),
        "the container died"
    );

    // What the idle timer does: there is nothing left to snapshot, so the sandbox is paused
    // with the snapshot it had — without a container started just to find that out.
    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused", "{paused:#}");
    assert!(
        handoff_tests::containers::containers_of(&id).is_empty(),
        "no container was started to pause a sandbox whose container is gone"
    );
    mcp.call_ok("sandbox_resume", json!({"sandboxId": id}))
        .await;
    let out = exec_after_loss(&mcp, &id, "cat a.txt; ls").await;
    assert_eq!(stdout(&out), "first\na.txt\n", "{out}");
}

#[tokio::test]
async fn processes_a_command_left_behind_are_reaped_when_they_end() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    // Orphans: a background job of a shell that has gone, and one in a session of its own.
    let out = exec(
        &mcp,
        &id,
        "(sleep 0.2 &) ; setsid sh -c 'sleep 0.3' > /dev/null 2>&1 < /dev/null & echo left",
    )
    .await;
    assert_eq!(stdout(&out), "left\n", "{out}");
    // A fork snapshots the workspace, which stops everything the sandbox runs first.
    mcp.call_ok("sandbox_fork", json!({"sandboxId": id})).await;
    assert_eq!(stdout(&exec(&mcp, &id, "echo again").await), "again\n");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, zombies) =
        container_of(&id).exec("root", "ps -eo stat=,pid=,ppid=,args= | awk '$1 ~ /^Z/'");
    assert_eq!(code, 0, "{zombies}");
    assert_eq!(zombies.trim(), "", "zombies in the container");
}

#[tokio::test]
async fn a_stop_ends_a_process_that_left_for_a_session_of_its_own() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    let out = exec(
        &mcp,
        &id,
        "id -u; setsid sh -c 'while :; do date +%s%N > tick; sleep 0.05; done' \
         > /dev/null 2>&1 < /dev/null & for _ in $(seq 100); do test -s tick && break; \
         sleep 0.05; done; test -s tick && echo ticking",
    )
    .await;
    let text = stdout(&out);
    assert!(text.ends_with("ticking\n"), "{out}");
    let uid = text.lines().next().unwrap_or_default().trim().to_string();
    // A fork snapshots the workspace, which stops everything the sandbox runs first; the
    // sandbox then stays stopped until its next command.
    mcp.call_ok("sandbox_fork", json!({"sandboxId": id})).await;
    let (code, left) = container_of(&id).exec(
        "root",
        &format!("ps -eo uid=,pid=,stat=,args= | awk '$1 == {uid} && $3 !~ /^Z/'"),
    );
    assert_eq!(code, 0, "{left}");
    assert_eq!(
        left.trim(),
        "",
        "the sandbox user's processes after the stop"
    );
}
