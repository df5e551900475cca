//! Requests to the sandbox daemon that do not get their answer: a caller that goes away while
//! its command runs, and a background start sent again because its reply was lost (also after
//! the table has let the process go).

use crate::daemon_api::daemon;
use handoff_tests::daemon::Client;
use serde_json::{json, Value};
use std::time::Duration;

/// Sends `/exec` for `command` and goes away after `patience` without reading the answer.
async fn exec_and_leave(c: &Client, command: &str, patience: Duration) {
    let sent = c
        .http
        .post(format!("{}/exec", c.base))
        .bearer_auth(&c.token)
        .timeout(patience)
        .json(&json!({"command": command, "timeout_ms": 120_000}))
        .send()
        .await;
    assert!(
        sent.as_ref().is_err_and(|e| e.is_timeout()),
        "the command answered before its caller left: {sent:?}"
    );
}

/// `command`'s output once `done` holds of it, tried every 200 ms for up to `within`.
async fn output_once(
    c: &Client,
    command: &str,
    within: Duration,
    done: fn(&str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let out = c.exec(command, 10_000).await;
        let stdout = out["stdout"].as_str().unwrap_or_default().to_string();
        if done(&stdout) || tokio::time::Instant::now() >= deadline {
            return stdout;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many of the sandbox's processes run `sleep <seconds>`.
fn sleeping(seconds: u32) -> String {
    format!("ps -eo args | grep -c '^sleep {seconds}$' || true")
}

#[tokio::test]
async fn a_command_whose_caller_went_away_is_stopped_after_it_may_clean_up() {
    let c = Client::new(daemon(), "caller-gone").await;
    // A command that cleans up on SIGTERM, with a child of its own.
    let tidy = "trap 'echo cleaned > cleaned.txt; exit 143' TERM; sleep 101 & wait";
    exec_and_leave(&c, tidy, Duration::from_secs(2)).await;
    let cleaned = output_once(
        &c,
        "cat cleaned.txt 2>/dev/null",
        Duration::from_secs(10),
        |o| !o.is_empty(),
    )
    .await;
    assert_eq!(cleaned, "cleaned\n", "the command was not given SIGTERM");
    let left = output_once(&c, &sleeping(101), Duration::from_secs(10), |o| {
        o.trim() == "0"
    })
    .await;
    assert_eq!(left.trim(), "0", "the command's child runs on");

    // One that ignores SIGTERM is killed, its whole group, a moment later.
    exec_and_leave(&c, "trap '' TERM; sleep 102", Duration::from_secs(2)).await;
    let left = output_once(&c, &sleeping(102), Duration::from_secs(10), |o| {
        o.trim() == "0"
    })
    .await;
    assert_eq!(left.trim(), "0", "a command ignoring SIGTERM runs on");
}

#[tokio::test]
async fn a_git_command_whose_caller_went_away_leaves_no_lock_behind() {
    let c = Client::new(daemon(), "git-gone").await;
    // A clean filter that makes `git add` take a minute.
    let setup = c
        .exec(
            "git init -q repo && cd repo && git config filter.slow.clean 'sleep 103; cat' \
             && echo '* filter=slow' > .gitattributes && echo one > one.txt && echo ok",
            10_000,
        )
        .await;
    assert_eq!(setup["stdout"], "ok\n", "{setup:#}");
    let add = "cd repo && git add -A";
    exec_and_leave(&c, add, Duration::from_secs(3)).await;
    let lock = output_once(
        &c,
        "test -e repo/.git/index.lock && echo locked || echo free",
        Duration::from_secs(10),
        |o| o == "free\n",
    )
    .await;
    let ps = c.exec("ps -eo pid,pgid,stat,args", 5000).await;
    assert_eq!(
        lock, "free\n",
        "git's index lock was left behind: {}",
        ps["stdout"]
    );
    // The next git command in the checkout works.
    let status = c
        .exec("cd repo && git config --unset filter.slow.clean && git add -A && git status --porcelain", 20_000)
        .await;
    assert_eq!(status["exit_code"], 0, "{status:#}");
    assert!(
        status["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("A  one.txt"),
        "{status:#}"
    );
}

/// Starts a background process with `key`.
async fn start_keyed(c: &Client, command: &str, key: &str) -> Value {
    let started = c
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": command, "key": key})),
        )
        .await;
    assert_eq!(started.status, 200, "{}", started.body);
    started.json()
}

#[tokio::test]
async fn a_background_start_sent_again_with_its_key_starts_nothing_more() {
    let c = Client::new(daemon(), "keyed-start").await;
    let first = start_keyed(&c, "exec sleep 104", "agent-1").await;
    let again = start_keyed(&c, "exec sleep 104", "agent-1").await;
    assert_eq!(again["id"], first["id"], "{again:#}");
    let other = start_keyed(&c, "exec sleep 104", "agent-2").await;
    assert_ne!(other["id"], first["id"], "{other:#}");
    let running = output_once(&c, &sleeping(104), Duration::from_secs(10), |o| {
        o.trim() == "2"
    })
    .await;
    assert_eq!(running.trim(), "2", "one process per key");

    // A key whose process ended still answers with it (ended): nothing starts again.
    let id = first["id"].as_u64().unwrap_or_default();
    let killed = c
        .send(reqwest::Method::DELETE, &format!("/processes/{id}"), None)
        .await;
    assert_eq!(killed.status, 200, "{}", killed.body);
    let ended = start_keyed(&c, "exec sleep 104", "agent-1").await;
    assert_eq!(
        (ended["id"].as_u64(), &ended["running"]),
        (Some(id), &json!(false))
    );
    let running = output_once(&c, &sleeping(104), Duration::from_secs(10), |o| {
        o.trim() == "1"
    })
    .await;
    assert_eq!(running.trim(), "1");

    // Keys are at most 128 bytes (`PROCESS_KEY_MAX`).
    let long = "k".repeat(129);
    let refused = c
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "true", "key": long})),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("key"), "{}", refused.body);
}

/// The ids of the processes the sandbox's table lists.
async fn listed(c: &Client) -> Vec<u64> {
    let list = c.send(reqwest::Method::GET, "/processes", None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    list.json()["processes"]
        .as_array()
        .map(|all| all.iter().filter_map(|p| p["id"].as_u64()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_key_answers_with_its_process_after_the_table_has_let_it_go() {
    let c = Client::new(daemon(), "keyed-pruned").await;
    let first = start_keyed(&c, "exit 7", "run-1-script-1").await;
    let id = first["id"].as_u64().unwrap_or_default();
    // 64 processes are remembered; later starts let the oldest ended ones go.
    for n in 0..70 {
        let started = c
            .send(
                reqwest::Method::POST,
                "/processes",
                Some(json!({"command": format!("exit {}", n % 2)})),
            )
            .await;
        assert_eq!(started.status, 200, "{}", started.body);
    }
    let ids = listed(&c).await;
    assert!(
        !ids.contains(&id),
        "the keyed process is still listed: {ids:?}"
    );

    let again = start_keyed(&c, "exit 7", "run-1-script-1").await;
    assert_eq!(
        (again["id"].as_u64(), &again["running"], &again["exit_code"]),
        (Some(id), &json!(false), &json!(7)),
        "{again:#}"
    );
    assert!(!listed(&c).await.contains(&id), "nothing started again");
}
