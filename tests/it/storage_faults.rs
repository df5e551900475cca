//! The artifacts bucket (R2) refusing writes when a run ends: the run still ends with its work
//! pushed and its pull request open; its result lists the transcript and the diff as pending
//! (no transcript link meanwhile); once the bucket takes writes again the session stores them
//! and the result links them — nothing is lost. A worker run whose logs and output the bucket
//! refuses waits in `collecting`, saying so, and completes with them once the bucket is back.
//! The bucket is made to fail by making its local storage immutable (`chattr +i`), which even
//! root cannot write through, so the test needs its own stack.

use handoff_tests::mcp::read;
use handoff_tests::runs::{page_saying, repo_name, status, terminal};
use handoff_tests::stack::RunStack;
use handoff_tests::workers::name;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Makes everything under a folder immutable while it lives.
struct Frozen(PathBuf);

impl Frozen {
    fn new(dir: &Path) -> Frozen {
        std::fs::create_dir_all(dir).expect("create the bucket's folder");
        chattr("+i", dir);
        Frozen(dir.to_path_buf())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        chattr("-i", &self.0);
    }
}

fn chattr(flag: &str, dir: &Path) {
    let ok = Command::new("chattr")
        .args(["-R", flag])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chattr -R {flag} {} failed", dir.display());
}

#[tokio::test]
async fn runs_and_worker_runs_keep_what_the_bucket_refuses_until_it_takes_it() {
    let stack = RunStack::start(&[]);
    let mcp = Mcp::connect(&stack.url()).await;
    a_run_ending_while_the_bucket_fails_keeps_its_artifacts_until_stored(&stack, &mcp).await;
    a_worker_run_waits_for_the_bucket_to_take_its_outputs(&stack, &mcp).await;
}

async fn a_run_ending_while_the_bucket_fails_keeps_its_artifacts_until_stored(
    stack: &RunStack,
    mcp: &Mcp,
) {
    let repository = stack.broken_repo(&repo_name("bucket-down"));
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "The test in test.sh fails. Fix it. [scenario:fix-add]",
                   "repository": &repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let frozen = Frozen::new(&stack.worker.state_dir().join("v3/r2"));

    let run = mcp
        .wait_run(&run_id, Duration::from_secs(240), terminal)
        .await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let result = &run["result"];
    assert_eq!(result["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(result["pullRequestUrl"].is_string(), "{run:#}");
    assert_eq!(
        result["artifactsPending"],
        json!(["transcript", "diff"]),
        "{run:#}"
    );
    assert!(result["transcriptUrl"].is_null(), "{run:#}");
    page_saying(&run, "The transcript is not stored yet").await;

    // The bucket takes writes again: the session stores what it kept.
    drop(frozen);
    let stored = mcp
        .wait_run(&run_id, Duration::from_secs(120), |r| {
            r["result"]["artifactsPending"].is_null()
        })
        .await;
    let transcript_url = stored["result"]["transcriptUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("no transcript after the bucket came back: {stored:#}"));
    let transcript = read(reqwest::get(transcript_url).await.unwrap()).await;
    assert_eq!(transcript.status, 200);
    let messages: Value = transcript.json();
    assert!(
        messages.as_array().is_some_and(|m| m.len() >= 2),
        "{messages}"
    );
    let diff = mcp
        .request(
            "resources/read",
            json!({"uri": format!("handoff://runs/{run_id}/diff")}),
        )
        .await;
    let text = diff["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("diff --git a/add.sh b/add.sh"), "{diff:#}");
}

async fn a_worker_run_waits_for_the_bucket_to_take_its_outputs(stack: &RunStack, mcp: &Mcp) {
    let worker = name("bucket-down");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\noutputs:\n  files:\n    - {{path: note.txt, media_type: text/plain, required: true}}\n"
    );
    mcp.deploy(&[
        ("worker.yml", &manifest),
        (
            "run.sh",
            "echo kept > outputs/note.txt; echo wrote the note\n",
        ),
    ])
    .await;
    let frozen = Frozen::new(&stack.worker.state_dir().join("v3/r2"));
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let waiting = mcp
        .wait_worker(&run_id, Duration::from_secs(120), |r| {
            r["message"].as_str().is_some_and(|m| m.contains("refused"))
                || r["completedAt"].is_string()
        })
        .await;
    assert_eq!(waiting["status"], json!("running"), "{waiting:#}");
    assert_eq!(waiting["phase"], json!("collecting"), "{waiting:#}");

    drop(frozen);
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert!(
        run["logs"]["stdout"]
            .as_str()
            .is_some_and(|o| o.contains("wrote the note")),
        "{run:#}"
    );
    let url = run["outputs"][0]["downloadUrl"]
        .as_str()
        .expect("download link");
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "kept\n");
}
