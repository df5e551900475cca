//! Background workers against the real stack: deploys checked in full and kept as versions,
//! script runs in fresh sandboxes with typed inputs, outputs downloadable through signed links,
//! secrets that reach the worker but never its logs or results, rollback and replay.

use handoff_tests::stack;
use handoff_tests::workers::name;
use handoff_tests::Mcp;
use serde_json::json;

const REPORT: &str = r#"
import json, os
inputs = json.load(open(os.environ["HANDOFF_INPUTS"]))
print("report for", inputs["city"], "over", inputs["days"], "days")
with open("outputs/report.csv", "w") as f:
    f.write("city,days\n%s,%d\n" % (inputs["city"], inputs["days"]))
json.dump({"rows": 1, "city": inputs["city"], "phase": os.environ["HANDOFF_PHASE"]}, open("result.json", "w"))
"#;

fn report_manifest(name: &str) -> String {
    format!(
        r#"schema_version: 1
name: {name}
title: City report
runtime: python3
inputs:
  - {{name: city, type: string, required: true}}
  - {{name: days, type: number, default: 7, min: 1, max: 31}}
  - {{name: format, type: select, options: [csv, pdf], default: csv}}
outputs:
  files:
    - {{path: report.csv, media_type: text/csv, required: true}}
  result:
    schema:
      type: object
      required: [rows, city]
      properties:
        rows: {{type: integer}}
        city: {{type: string}}
"#
    )
}

#[tokio::test]
async fn deploys_are_checked_in_full_and_kept_as_versions() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("deploy");
    // An invalid folder: every problem listed by field, nothing stored.
    let bad = format!(
        "schema_version: 1\nname: {worker}\nruntime: ruby\ntimeout: 5\ninputs:\n  - {{name: x, type: colour}}\n"
    );
    let text = mcp
        .call_err("workers_deploy", json!({"files": {"worker.yml": bad}}))
        .await;
    for field in ["runtime:", "timeout:", "inputs[0].type:"] {
        assert!(text.contains(field), "{field} not named in: {text}");
    }
    let missing = mcp.call_err("workers_get", json!({"worker": worker})).await;
    assert!(missing.contains("not found"), "{missing}");
    // A valid one becomes v1; the same folder again changes nothing; another is v2.
    let manifest = report_manifest(&worker);
    let first = mcp
        .deploy(&[("worker.yml", &manifest), ("run.py", REPORT)])
        .await;
    assert_eq!(first["created"], json!(true), "{first:#}");
    assert_eq!(first["version"]["version"], json!(1));
    assert_eq!(first["version"]["source"], json!("inline"));
    let again = mcp
        .deploy(&[("worker.yml", &manifest), ("run.py", REPORT)])
        .await;
    assert_eq!(again["created"], json!(false));
    assert_eq!(again["version"]["version"], json!(1));
    let changed = format!("{REPORT}\nprint('v2')\n");
    let second = mcp
        .deploy(&[("worker.yml", &manifest), ("run.py", &changed)])
        .await;
    assert_eq!(second["version"]["version"], json!(2));
    let shown = mcp.call_ok("workers_get", json!({"worker": worker})).await;
    assert_eq!(shown["currentVersion"], json!(2));
    assert_eq!(shown["manifest"]["inputs"][1]["default"], json!(7));
    assert_eq!(shown["manifest"]["limits"]["timeout_seconds"], json!(600));
    let versions = mcp
        .call_ok("workers_versions", json!({"worker": worker}))
        .await;
    let numbers: Vec<u64> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1]);
    let listed = mcp.call_ok("workers_list", json!({"limit": 100})).await;
    assert!(listed["workers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["name"] == json!(worker)));
    // Delete: gone from the list, its name free again with numbers that never repeat.
    mcp.call_ok("workers_delete", json!({"worker": worker}))
        .await;
    mcp.call_err("workers_get", json!({"worker": worker})).await;
    let revived = mcp
        .deploy(&[("worker.yml", &manifest), ("run.py", REPORT)])
        .await;
    assert_eq!(revived["version"]["version"], json!(3));
}

#[tokio::test]
async fn a_manual_run_gets_typed_inputs_and_leaves_a_downloadable_output() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("report");
    mcp.deploy(&[
        ("worker.yml", &report_manifest(&worker)),
        ("run.py", REPORT),
    ])
    .await;
    // Inputs that do not fit are refused before anything starts, each named.
    let refused = mcp
        .call_err(
            "workers_run",
            json!({"worker": worker, "inputs": {"days": 40, "format": "doc", "colour": 1}}),
        )
        .await;
    for field in [
        "inputs.city",
        "inputs.days",
        "inputs.format",
        "inputs.colour",
    ] {
        assert!(refused.contains(field), "{field}: {refused}");
    }
    let run_id = mcp
        .run_worker(&worker, json!({"inputs": {"city": "Oslo", "days": 3}}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["trigger"], json!("manual"));
    assert_eq!(
        run["inputs"],
        json!({"city": "Oslo", "days": 3, "format": "csv"})
    );
    assert_eq!(run["exitCode"], json!(0));
    assert_eq!(
        run["result"],
        json!({"rows": 1, "city": "Oslo", "phase": "run"})
    );
    let phases = handoff_tests::runs::phases(&run);
    assert_eq!(
        phases,
        [
            "queued",
            "preparing_sandbox",
            "staging",
            "running",
            "collecting",
            "done"
        ],
        "{run:#}"
    );
    assert!(run["logs"]["stdout"]
        .as_str()
        .unwrap()
        .contains("report for Oslo over 3 days"));
    assert!(run["durationMs"].as_u64().is_some());
    let output = &run["outputs"][0];
    assert_eq!(output["path"], json!("report.csv"));
    assert_eq!(output["mediaType"], json!("text/csv"));
    let url = output["downloadUrl"].as_str().expect("download link");
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(headers["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(response.text().await.unwrap(), "city,days\nOslo,3\n");
    // The link opens that file only, and only with its token.
    let other = url.replace("report.csv", "other.csv");
    assert_eq!(reqwest::get(&other).await.unwrap().status(), 404);
    let forged = format!("{}x", url);
    assert_eq!(reqwest::get(&forged).await.unwrap().status(), 404);
    // The run's sandbox is gone once the run ended.
    let sandboxes = mcp.call_ok("sandbox_list", json!({"limit": 100})).await;
    assert!(
        !sandboxes.to_string().contains(&run_id),
        "the worker's sandbox outlived its run: {sandboxes}"
    );
}

#[tokio::test]
async fn a_failing_script_or_a_broken_promise_fails_the_run_with_its_logs() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("fails");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\noutputs:\n  result:\n    schema: {{type: object, required: [ok]}}\n"
    );
    mcp.deploy(&[
        ("worker.yml", &manifest),
        ("run.sh", "echo working; echo 'no such thing' >&2; exit 3\n"),
    ])
    .await;
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("failed"));
    assert_eq!(run["error"]["code"], json!("worker_failed"));
    assert!(run["error"]["message"]
        .as_str()
        .unwrap()
        .contains("exited with code 3: no such thing"));
    assert_eq!(run["logs"]["stdout"], json!("working\n"));
    // Exit 0 without the promised result.json: output_invalid.
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", "echo fine\n")])
        .await;
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["error"]["code"], json!("output_invalid"), "{run:#}");
    assert!(run["error"]["message"]
        .as_str()
        .unwrap()
        .contains("result.json is missing"));
}

#[tokio::test]
async fn secrets_reach_the_worker_but_never_its_logs_results_or_outputs() {
    const CANARY: &str = "canary-worker-secret-3f9a1c77";
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("secret");
    let manifest =
        format!("schema_version: 1\nname: {worker}\nruntime: sh\nsecrets: [API_TOKEN]\n");
    let script = "echo \"token is $API_TOKEN\"; echo \"$API_TOKEN\" >&2; \
                  printf '{\"seen\": \"%s\", \"length\": %d}' \"$API_TOKEN\" ${#API_TOKEN} > result.json; \
                  echo \"$API_TOKEN\" > outputs/leak.txt; sleep 1\n";
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", script)])
        .await;
    // Not set yet: a manual run is refused, naming what to do.
    let refused = mcp.call_err("workers_run", json!({"worker": worker})).await;
    assert!(refused.contains("API_TOKEN") && refused.contains("workers_secret_set"));
    let set = mcp
        .call_ok(
            "workers_secret_set",
            json!({"name": "API_TOKEN", "value": CANARY, "worker": worker}),
        )
        .await;
    assert!(!set.to_string().contains(CANARY));
    assert_eq!(set["usedBy"], json!([worker]));
    let listed = mcp.call_ok("workers_secrets_list", json!({})).await;
    assert!(listed.to_string().contains("API_TOKEN"));
    assert!(!listed.to_string().contains(CANARY));
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    // It had the value (its length), yet every trace of it is redacted.
    assert_eq!(run["result"]["length"], json!(CANARY.len()));
    assert_eq!(run["result"]["seen"], json!("[secret API_TOKEN]"));
    assert!(run["logs"]["stdout"]
        .as_str()
        .unwrap()
        .contains("token is [secret API_TOKEN]"));
    let everything = mcp
        .call("workers_run_get", json!({"runId": run_id}))
        .await
        .to_string();
    assert!(
        !everything.contains(CANARY),
        "the secret leaked: {everything}"
    );
    let url = run["outputs"][0]["downloadUrl"].as_str().unwrap();
    let file = reqwest::get(url).await.unwrap().text().await.unwrap();
    assert_eq!(file, "[secret API_TOKEN]\n");
    let page = run["webUiUrl"].as_str().unwrap();
    let html = reqwest::get(page).await.unwrap().text().await.unwrap();
    assert!(!html.contains(CANARY));
    let listing = mcp
        .call("workers_runs", json!({"worker": worker}))
        .await
        .to_string();
    assert!(!listing.contains(CANARY));
    mcp.call_ok(
        "workers_secret_delete",
        json!({"name": "API_TOKEN", "worker": worker}),
    )
    .await;
}

#[tokio::test]
async fn rollback_then_run_uses_the_old_version_and_replay_links_to_its_origin() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("roll");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\ninputs:\n  - {{name: word, type: string, default: hi}}\n"
    );
    let script = |v: &str| format!("echo \"{v} $(cat inputs.json | tr -d '\\n ')\"\n");
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", &script("one"))])
        .await;
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", &script("two"))])
        .await;
    let rolled = mcp
        .call_ok("workers_rollback", json!({"worker": worker, "version": 1}))
        .await;
    assert_eq!(rolled["version"]["version"], json!(3));
    assert_eq!(rolled["version"]["source"], json!("rollback to v1"));
    let run_id = mcp
        .run_worker(&worker, json!({"inputs": {"word": "yo"}}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["version"], json!(3));
    assert_eq!(
        run["logs"]["stdout"],
        json!("one {\"word\":\"yo\"}\n"),
        "{run:#}"
    );
    // Replay on v2: same inputs, another version, linked to its origin.
    let replay = mcp
        .call_ok("workers_run_replay", json!({"runId": run_id, "version": 2}))
        .await;
    let replayed = mcp.worker_ended(replay["runId"].as_str().unwrap()).await;
    assert_eq!(replayed["replayOf"], json!(run_id));
    assert_eq!(replayed["trigger"], json!("replay"));
    assert_eq!(replayed["version"], json!(2));
    assert_eq!(replayed["logs"]["stdout"], json!("two {\"word\":\"yo\"}\n"));
    let none = mcp
        .call_err("workers_rollback", json!({"worker": worker, "version": 9}))
        .await;
    assert!(none.contains("no version 9"), "{none}");
}

#[tokio::test]
async fn a_worker_deploys_from_a_folder_of_a_repository() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("repo");
    let repo = handoff_tests::runs::repo_name("workers");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\n");
    let repository = stack.forge.create_repo(
        "acme",
        &repo,
        &[
            ("README.md", "not part of the worker\n"),
            ("workers/greet/worker.yml", &manifest),
            (
                "workers/greet/run.sh",
                ". ./lib/words.sh; echo \"$GREETING from the repository\"\n",
            ),
            ("workers/greet/lib/words.sh", "GREETING=hello\n"),
        ],
    );
    let deployed = mcp
        .call_ok(
            "workers_deploy",
            json!({"repository": repository, "path": "workers/greet", "ref": "main"}),
        )
        .await;
    assert_eq!(
        deployed["version"]["source"],
        json!(format!("repository {repository}@main:workers/greet"))
    );
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(
        run["logs"]["stdout"],
        json!("hello from the repository\n"),
        "{run:#}"
    );
    let missing = mcp
        .call_err(
            "workers_deploy",
            json!({"repository": repository, "path": "workers/nope"}),
        )
        .await;
    assert!(missing.contains("no folder"), "{missing}");
    let both = mcp
        .call_err(
            "workers_deploy",
            json!({"repository": repository, "files": {"worker.yml": manifest}}),
        )
        .await;
    assert!(both.contains("not both"), "{both}");
    let escape = mcp
        .call_err(
            "workers_deploy",
            json!({"repository": repository, "path": "../other"}),
        )
        .await;
    assert!(escape.contains("path"), "{escape}");
}

#[tokio::test]
async fn every_script_runtime_reads_its_inputs_and_writes_an_output() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    handoff_tests::workers::every_runtime(&mcp).await;
}

#[tokio::test]
async fn workers_run_as_an_mcp_task_answers_the_run_when_it_ends() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("task");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\n");
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", "echo tasked\n")])
        .await;
    let created = mcp
        .request(
            "tools/call",
            json!({"name": "workers_run", "arguments": {"worker": worker}, "task": {"ttl": 3_600_000}}),
        )
        .await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    assert!(task_id.starts_with("run_"), "{created}");
    mcp.worker_ended(&task_id).await;
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    let content = &result["result"]["structuredContent"];
    assert_eq!(content["runId"], json!(task_id), "{result}");
    assert_eq!(content["status"], json!("completed"));
    assert_eq!(content["logTail"], json!("tasked"));
    // A worker run is not a work session of its own to continue.
    let sessions = mcp
        .call_ok("opencode_list_sessions", json!({"limit": 100}))
        .await;
    assert!(!sessions.to_string().contains(&task_id), "{sessions}");
}

#[tokio::test]
async fn file_inputs_long_logs_and_cancel() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("files");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\n\
         inputs:\n  - {{name: data, type: file, accept: [.csv], max_size: 1KB, required: true}}\n  - {{name: wait, type: boolean, default: false}}\n"
    );
    let script =
        "cat inputs/data; grep -q '\"filename\": \"numbers.csv\"' inputs.json && echo named; \
                  head -c 3000000 /dev/zero | tr '\\0' x > outputs/big.txt; \
                  seq 1 20000; grep -q '\"wait\": true' inputs.json && sleep 60; exit 0\n";
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", script)])
        .await;
    use base64::Engine;
    let csv = base64::engine::general_purpose::STANDARD.encode("a,b\n1,2\n");
    let file = |name: &str| json!({"data": {"filename": name, "contentBase64": csv}});
    // The file must fit the input's accept and size.
    let refused = mcp
        .call_err(
            "workers_run",
            json!({"worker": worker, "files": file("numbers.txt")}),
        )
        .await;
    assert!(
        refused.contains("files.data") && refused.contains(".csv"),
        "{refused}"
    );
    let missing = mcp.call_err("workers_run", json!({"worker": worker})).await;
    assert!(missing.contains("files.data: is required"), "{missing}");
    let run_id = mcp
        .run_worker(&worker, json!({"files": file("numbers.csv")}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["inputFiles"], json!(["data"]));
    // A long log keeps its head and its tail.
    let logs = &run["logs"];
    assert_eq!(logs["truncated"], json!(true), "{logs}");
    let stdout = logs["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("a,b\n1,2\nnamed\n1\n2\n"),
        "{}",
        &stdout[..40]
    );
    assert!(stdout.trim_end().ends_with("20000"));
    assert!(stdout.contains("bytes omitted"));
    // An output of a few MiB is kept whole.
    let big = &run["outputs"][0];
    assert_eq!(big["path"], json!("big.txt"), "{run:#}");
    assert_eq!(big["size"], json!(3_000_000));
    let body = reqwest::get(big["downloadUrl"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.len(), 3_000_000);
    assert!(body.iter().all(|b| *b == b'x'));
    // Cancelled while it runs: its process and its sandbox go.
    let run_id = mcp
        .run_worker(
            &worker,
            json!({"files": file("numbers.csv"), "inputs": {"wait": true}}),
        )
        .await;
    mcp.wait_worker(&run_id, std::time::Duration::from_secs(60), |r| {
        r["liveLog"].as_str().unwrap_or_default().contains("20000")
    })
    .await;
    let cancelled = mcp
        .call_ok("workers_run_cancel", json!({"runId": run_id}))
        .await;
    assert_eq!(cancelled["status"], json!("cancelled"));
    let sandbox = cancelled["sandboxId"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let info = mcp
            .call("sandbox_info", json!({"sandboxId": sandbox}))
            .await;
        if info.to_string().contains("deleted") || info["result"]["isError"] == json!(true) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sandbox outlived the cancel: {info}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}
