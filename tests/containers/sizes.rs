//! Sizes on the container backend: each size's sandbox runs in a container of its size's class
//! (its own `[[containers]]` entry and instance type in wrangler.toml) — `large`, the default,
//! in the sandbox object's own; `small` and `medium` in a host object's — and behaves the same
//! whichever it is: files kept across a pause, a lost container replaced with the last
//! snapshot, the container gone when the sandbox is deleted. (workerd runs every class on the
//! local engine alike: the instance type itself applies on Cloudflare only.)

use crate::{exec, exec_after_loss, mcp, stdout};
use handoff_tests::containers::{container_of, containers_of, wait_gone};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn each_size_runs_in_its_own_container_class() {
    let mcp = mcp().await;
    for (size, class, instance_type, cpu_millis) in [
        (Some("small"), "sandboxhostsmall", "standard-1", 500),
        (Some("medium"), "sandboxhostmedium", "standard-2", 1000),
        (None, "sandboxobject", "standard-3", 2000),
    ] {
        let args = match size {
            Some(size) => json!({"size": size}),
            None => json!({}),
        };
        let created = mcp.call_ok("sandbox_create", args).await;
        let id = created["sandboxId"].as_str().unwrap().to_string();
        assert_eq!(created["size"], json!(size), "{created:#}");
        assert_eq!(
            created["machine"]["instanceType"], instance_type,
            "{created:#}"
        );
        // The size's limits apply inside its machine where the container can have cgroups of
        // its own; where it cannot (this engine), the report says so rather than claim them.
        let limits = &created["isolation"]["limits"];
        let notes = created["isolation"]["notes"].to_string();
        assert!(
            limits["cpuMillis"] == cpu_millis
                || (limits["cpuMillis"].is_null() && notes.contains("not enforced")),
            "{created:#}"
        );
        let container = container_of(&id);
        assert!(
            container.image().to_ascii_lowercase().contains(class),
            "{size:?} runs in {class}'s image, not {}",
            container.image()
        );
        assert_eq!(
            stdout(&exec(&mcp, &id, "echo hi > a.txt; cat a.txt").await),
            "hi\n"
        );
        let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
        assert_eq!(info["machine"]["instanceType"], instance_type, "{info:#}");
    }
}

#[tokio::test]
async fn a_hosted_sandbox_pauses_resumes_recovers_and_goes_away() {
    let mcp = mcp().await;
    let created = mcp
        .call_ok("sandbox_create", json!({"size": "small"}))
        .await;
    let id = created["sandboxId"].as_str().unwrap().to_string();
    exec(&mcp, &id, "echo kept > a.txt").await;
    let first = container_of(&id);

    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused", "{paused:#}");
    assert!(
        wait_gone(&id, Duration::from_secs(30)),
        "paused: no container"
    );
    assert_eq!(stdout(&exec(&mcp, &id, "cat a.txt").await), "kept\n");
    let second = container_of(&id);
    assert_ne!(second.id, first.id, "resumed in a new container");
    assert!(second
        .image()
        .to_ascii_lowercase()
        .contains("sandboxhostsmall"));

    // Its container dies: the next command gets a new one, with the last snapshot.
    exec(&mcp, &id, "echo after-the-snapshot > b.txt").await;
    second.kill();
    let out = exec_after_loss(&mcp, &id, "cat a.txt; ls").await;
    assert_eq!(stdout(&out), "kept\na.txt\n", "{out}");
    let third = container_of(&id);
    assert_ne!(third.id, second.id);

    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
    assert!(
        wait_gone(&id, Duration::from_secs(30)),
        "deleted: no container"
    );
    assert!(containers_of(&id).is_empty());
}
