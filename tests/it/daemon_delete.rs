//! Deleting a sandbox on the daemon while other calls are under way: nothing of it may be left
//! running, and a call that waited behind the delete hears that the sandbox is gone.

use crate::daemon_api::client_for;
use handoff_tests::daemon::Daemon;
use handoff_tests::soak::cgroups_of;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn calls_that_waited_behind_a_delete_are_told_it_is_gone_and_start_nothing() {
    let own = Daemon::start();
    let pid = own.pgid().expect("daemon pid") as u32;
    let c = client_for(&own, "deleted-behind");
    let created = c.send(reqwest::Method::PUT, "", Some(json!({}))).await;
    assert_eq!(created.status, 200, "{}", created.body);
    // A command holds the sandbox, so the delete waits for it; the calls sent after the delete
    // found the sandbox still there, and wait behind the delete.
    let deleted = delete_behind_a_command(&own, "deleted-behind").await;
    let behind = [
        (
            reqwest::Method::POST,
            "/exec",
            Some(json!({"command": "true", "timeout_ms": 5000})),
        ),
        (
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "sleep 60"})),
        ),
        (reqwest::Method::POST, "/files/mkdir?path=made", None),
        (reqwest::Method::GET, "/files/list?path=.", None),
        (reqwest::Method::GET, "/snapshot", None),
        // Ports and previews start a stopped sandbox: behind a delete they must not.
        (reqwest::Method::GET, "/ports", None),
        (reqwest::Method::GET, "/ports/8080/http/", None),
    ]
    .map(|(method, path, body)| {
        let c = client_for(&own, "deleted-behind");
        tokio::spawn(async move { (path, c.send(method, path, body).await) })
    });
    deleted.await.unwrap();
    for call in behind {
        let (path, answer) = call.await.unwrap();
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert!(
            answer.body.contains("deleted") || answer.body.contains("does not exist"),
            "{path}: {}",
            answer.body
        );
    }
    assert!(
        !own.sandboxes().join("deleted-behind").exists(),
        "the deleted sandbox's folder came back"
    );
    no_process_left_under(pid).await;
    assert_eq!(cgroups_of("deleted-behind"), Vec::<String>::new());
}

#[tokio::test]
async fn ports_and_previews_asked_for_during_a_delete_leave_no_cgroup_behind() {
    let own = Daemon::start();
    let pid = own.pgid().expect("daemon pid") as u32;
    for i in 0..6 {
        let id = format!("ports-during-delete-{i}");
        let c = client_for(&own, &id);
        let created = c.send(reqwest::Method::PUT, "", Some(json!({}))).await;
        assert_eq!(created.status, 200, "{}", created.body);
        assert_eq!(c.exec("true", 5000).await["exit_code"], 0);
        // Asked for over and over, before, during and after the delete.
        let askers: Vec<_> = (0..4)
            .map(|n| {
                let c = client_for(&own, &id);
                tokio::spawn(async move {
                    for _ in 0..40 {
                        let path = if n % 2 == 0 {
                            "/ports"
                        } else {
                            "/ports/8080/http/"
                        };
                        let answer = c.send(reqwest::Method::GET, path, None).await;
                        if answer.status == 404 {
                            break;
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(5 * i)).await;
        let deleted = c.send(reqwest::Method::DELETE, "", None).await;
        assert_eq!(deleted.status, 204, "{}", deleted.body);
        for asker in askers {
            asker.await.unwrap();
        }
        assert_eq!(cgroups_of(&id), Vec::<String>::new(), "round {i}");
        assert!(!own.sandboxes().join(&id).exists(), "round {i}");
    }
    no_process_left_under(pid).await;
}

#[tokio::test]
async fn a_screenshot_asked_for_during_a_delete_is_told_it_is_gone() {
    let own = Daemon::start();
    let pid = own.pgid().expect("daemon pid") as u32;
    let c = client_for(&own, "shot-behind");
    let created = c.send(reqwest::Method::PUT, "", Some(json!({}))).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let shot = json!({"action": "screenshot"});
    let first = c
        .send(reqwest::Method::POST, "/desktop", Some(shot.clone()))
        .await;
    assert_eq!(
        first.status, 200,
        "the desktop did not start: {}",
        first.body
    );
    // A command holds the sandbox, so the delete waits for it; the screenshot asked for after
    // the delete finds the desktop running and must wait behind the delete, not photograph it.
    let deleted = delete_behind_a_command(&own, "shot-behind").await;
    let behind = c.send(reqwest::Method::POST, "/desktop", Some(shot)).await;
    deleted.await.unwrap();
    let said: String = behind.body.chars().take(200).collect();
    assert_eq!(behind.status, 404, "a screenshot was taken: {said}");
    assert!(behind.body.contains("deleted"), "{said}");
    no_process_left_under(pid).await;
    assert_eq!(cgroups_of("shot-behind"), Vec::<String>::new());
}

#[tokio::test]
async fn a_sandbox_deleted_while_it_starts_leaves_no_process_behind() {
    let own = Daemon::start();
    let pid = own.pgid().expect("daemon pid") as u32;
    for i in 0..8 {
        let c = client_for(&own, &format!("start-then-delete-{i}"));
        let created = c
            .send(reqwest::Method::PUT, "?start=1", Some(json!({})))
            .await;
        assert_eq!(created.status, 200, "{}", created.body);
        // Deleted at once, before or while its init starts.
        let deleted = c.send(reqwest::Method::DELETE, "", None).await;
        assert_eq!(deleted.status, 204, "{}", deleted.body);
    }
    no_process_left_under(pid).await;
}

/// Starts a command that holds sandbox `id` for 2 s and, while it runs, a delete that waits for
/// it; returns once the delete waits, with a task that ends when both have ended well.
async fn delete_behind_a_command(own: &Daemon, id: &str) -> tokio::task::JoinHandle<()> {
    let holder = {
        let c = client_for(own, id);
        tokio::spawn(async move { c.exec("sleep 2", 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delete = {
        let c = client_for(own, id);
        tokio::spawn(async move { c.send(reqwest::Method::DELETE, "", None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::spawn(async move {
        assert_eq!(holder.await.unwrap()["exit_code"], 0);
        let deleted = delete.await.unwrap();
        assert_eq!(deleted.status, 204, "{}", deleted.body);
    })
}

/// Waits up to 4 s for the daemon `pid` to have no process under it left.
async fn no_process_left_under(pid: u32) {
    let mut left = Vec::new();
    for _ in 0..40 {
        left = descendants(pid);
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(left.is_empty(), "processes left under the daemon: {left:?}");
}

/// Every process descended from `pid`, by `/proc/<p>/stat`'s parent field.
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces, so read after its closing paren.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    all.iter()
        .copied()
        .filter(|&p| {
            let mut at = p;
            for _ in 0..64 {
                match parent_of(at) {
                    Some(parent) if parent == pid => return true,
                    Some(parent) if parent > 1 => at = parent,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}
