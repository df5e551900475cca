//! Delegated coding runs end to end with real OpenCode, real git and the real daemon and Worker:
//! the scripted LLM plays the model and the local forge plays GitHub.

use handoff_tests::mcp::read;
use handoff_tests::runs::{agents_left, repo_name, status, terminal, view_saying};
use handoff_tests::stack::{
    self, RunStack, CANARY_ANTHROPIC_KEY, CANARY_GITHUB_TOKEN, CANARY_OPENAI_KEY, PROXY_SECRET,
};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(240);

pub(crate) async fn start(mcp: &Mcp, arguments: Value) -> (String, String) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    (
        out["runId"].as_str().unwrap().to_string(),
        out["sessionId"].as_str().unwrap().to_string(),
    )
}

pub(crate) async fn finished(mcp: &Mcp, run_id: &str) -> Value {
    mcp.wait_run(run_id, RUN_TIMEOUT, terminal).await
}

/// A run of `task` under `scenario` on a new broken repository named for it, once it
/// completed (asserted), with its session and repository.
pub(crate) async fn completed(mcp: &Mcp, scenario: &str, task: &str) -> (Value, String, String) {
    let repository = stack::shared().broken_repo(&repo_name(scenario));
    let task = format!("{task} [scenario:{scenario}]");
    let (run_id, session) = start(mcp, json!({"task": task, "repository": repository})).await;
    let run = finished(mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    (run, session, repository)
}

async fn working(mcp: &Mcp, run_id: &str) -> Value {
    mcp.wait_run(run_id, RUN_TIMEOUT, |r| {
        r["progress"]["phase"] == "working" || terminal(r)
    })
    .await
}

/// Every secret value the Worker holds.
fn canaries() -> [&'static str; 4] {
    [
        CANARY_ANTHROPIC_KEY,
        CANARY_GITHUB_TOKEN,
        CANARY_OPENAI_KEY,
        PROXY_SECRET,
    ]
}

fn assert_no_canary(what: &str, text: &str) {
    for canary in canaries() {
        assert!(
            !text.contains(canary),
            "{what} contains the secret {canary}"
        );
    }
}

#[tokio::test]
async fn a_run_fixes_the_failing_test_and_opens_a_pull_request() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("calc");
    let repository = stack.broken_repo(&name);
    let (run_id, session_id) = start(
        &mcp,
        json!({"task": "The test in test.sh fails. Fix it. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let result = &run["result"];
    let branch = format!("handoff/{run_id}");
    assert_eq!(result["branch"], json!(branch));
    assert_eq!(result["changedFiles"], json!(["add.sh"]));
    assert!(
        result["summary"].as_str().unwrap().contains("Fixed add.sh"),
        "{result:#}"
    );
    assert!(result["commits"].as_array().unwrap().len() == 1);
    assert!(result["diffstat"]
        .as_str()
        .unwrap()
        .contains("1 file changed"));
    assert!(result["tokens"]["input"].as_u64().unwrap() > 0);
    let progress = &run["progress"];
    assert!(progress["steps"].as_u64().unwrap() >= 3, "{progress:#}");
    assert_eq!(progress["recentSteps"][0]["tool"], "bash");
    // The run names the model that ran it, the default one included.
    assert!(
        run["model"]
            .as_str()
            .is_some_and(|m| m.starts_with("anthropic/")),
        "{run:#}"
    );
    // An ended run says how it ended, not what it was doing last, and how long each phase took.
    assert_eq!(progress["phase"], "done", "{progress:#}");
    assert!(
        progress["message"]
            .as_str()
            .unwrap()
            .starts_with("done: opened http"),
        "{progress:#}"
    );
    let phases = handoff_tests::runs::phases(&run);
    assert_eq!(
        phases,
        [
            "queued",
            "preparing_sandbox",
            "cloning",
            "starting_agent",
            "working",
            "pushing",
            "opening_pr",
            "done"
        ],
        "{run:#}"
    );
    let last = run["phases"].as_array().unwrap().len() - 1;
    for (i, phase) in run["phases"].as_array().unwrap().iter().enumerate() {
        assert_eq!(phase["durationMs"].is_u64(), i < last, "{phase}");
    }

    // The forge holds the pull request, from the run's branch, whose commit carries the fix.
    let pulls: Vec<_> = stack
        .forge
        .pulls()
        .into_iter()
        .filter(|p| p.repo == name)
        .collect();
    assert_eq!(pulls.len(), 1);
    let pull = &pulls[0];
    assert_eq!(pull.head, branch);
    assert_eq!(pull.base, "main");
    assert_eq!(result["pullRequestUrl"], json!(pull.html_url));
    assert!(pull.body.contains(&run_id) && pull.body.contains("Fixed add.sh"));
    let fixed = stack
        .forge
        .file_on_branch("acme", &name, &branch, "add.sh")
        .unwrap();
    assert!(fixed.contains("$1 + $2"), "{fixed}");
    assert!(stack
        .forge
        .file_on_branch("acme", &name, "main", "add.sh")
        .unwrap()
        .contains("$1 - $2"));

    // The model saw the real key through the proxy; the forge saw the real token, only.
    let requests: Vec<_> = stack
        .llm
        .requests("fix-add")
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
        .collect();
    assert!(requests.len() >= 4, "{requests:?}");
    assert!(requests
        .iter()
        .all(|r| r.api_key == CANARY_ANTHROPIC_KEY && r.model == "claude-sonnet-4-5"));
    let seen: Vec<_> = stack
        .forge
        .seen()
        .into_iter()
        .filter(|s| s.path.contains(&name))
        .collect();
    assert!(
        seen.iter().any(|s| s.path.ends_with("git-receive-pack")),
        "pushed: {seen:?}"
    );
    assert!(seen.iter().all(|s| s.authorized), "{seen:?}");

    // The run page and the transcript.
    let page = read(
        reqwest::get(run["webUiUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&pull.html_url) && page.body.contains("add.sh"));
    let transcript = read(
        reqwest::get(result["transcriptUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(transcript.status, 200);
    assert!(transcript.json().as_array().unwrap().len() >= 2);

    // The same as MCP resources: the change as a unified diff, the transcript, the run.
    let read_resource = |uri: String| {
        let mcp = &mcp;
        async move {
            let read = mcp.request("resources/read", json!({"uri": uri})).await;
            read["result"]["contents"][0].clone()
        }
    };
    let diff = read_resource(format!("handoff://runs/{run_id}/diff")).await;
    assert_eq!(diff["mimeType"], "text/x-diff", "{diff}");
    let diff = diff["text"].as_str().unwrap();
    assert!(
        diff.contains("diff --git a/add.sh b/add.sh") && diff.contains("\n+"),
        "{diff}"
    );
    let transcript = read_resource(format!("handoff://runs/{run_id}/transcript")).await;
    let transcript: Value = serde_json::from_str(transcript["text"].as_str().unwrap()).unwrap();
    assert!(transcript.as_array().unwrap().len() >= 2);
    let resource = read_resource(format!("handoff://runs/{run_id}")).await;
    let resource: Value = serde_json::from_str(resource["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        resource["result"]["pullRequestUrl"],
        result["pullRequestUrl"]
    );
    // The review prompt names the newest completed run by default.
    let prompt = mcp
        .request(
            "prompts/get",
            json!({"name": "review_run", "arguments": {"runId": run_id}}),
        )
        .await;
    let text = prompt["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains(&format!("handoff://runs/{run_id}/diff")),
        "{text}"
    );

    // The session's sandbox is a sandbox like any other.
    let sandbox = format!("sbx_{}", session_id.trim_start_matches("ses_"));
    let info = mcp
        .call_ok("sandbox_info", json!({"sandboxId": sandbox}))
        .await;
    assert_eq!(info["status"], "running");
}

/// A turn of more messages than the session first reads at its end (the latest 100; it reads
/// further until the prompt is among them): the whole turn is the run's, all 111 steps and the
/// answer at its end.
#[tokio::test]
async fn a_turn_longer_than_the_first_read_is_read_whole() {
    let mcp = Mcp::connect(&stack::shared().url()).await;
    let (run, ..) = completed(&mcp, "long-turn", "Fix the test, then keep checking.").await;
    assert_eq!(run["progress"]["steps"], 111, "{:#}", run["progress"]);
    let result = &run["result"];
    assert!(
        result["summary"]
            .as_str()
            .is_some_and(|s| s.contains("Fixed add.sh in 111 steps.")),
        "{result:#}"
    );
    let transcript = read(
        reqwest::get(result["transcriptUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    let messages = transcript.json().as_array().unwrap().len();
    assert!(messages > 100, "{messages} messages");
}

/// Tool calls dense with small values (40,000 numbers beside each of 40 commands): parsed
/// whole, the latest messages would take over 64 MiB and be refused; the session keeps only what
/// it reads of them, so the run is followed to its end.
#[tokio::test]
async fn a_session_continues_in_order_in_the_same_sandbox_and_conversation() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("cont");
    let repository = stack.broken_repo(&name);
    let (first, session) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    // Queued behind the first run of the session.
    let second = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Add follow-up notes. [scenario:followup]", "repository": repository, "sessionId": session}),
        )
        .await;
    let second_id = second["runId"].as_str().unwrap().to_string();
    assert_eq!(second["sessionId"], json!(session));
    let early = mcp.get_run(&second_id).await;
    assert_eq!(
        status(&early),
        "queued",
        "waits for the first run: {early:#}"
    );
    let one = finished(&mcp, &first).await;
    let two = finished(&mcp, &second_id).await;
    assert_eq!(status(&one), "completed", "{one:#}");
    assert_eq!(status(&two), "completed", "{two:#}");
    assert!(
        two["startedAt"].as_str().unwrap() >= one["completedAt"].as_str().unwrap(),
        "one at a time, in order"
    );
    // Same OpenCode conversation: the second task's first model call carries the first run's
    // messages.
    let followups: Vec<_> = stack
        .llm
        .requests("followup")
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(second_id.as_str()))
        .collect();
    assert!(followups[0].messages > 4, "history included: {followups:?}");
    // The second run's conversation page shows the whole session's, its own turn marked.
    let page = view_saying(&two, "conversation", "messages in this session").await;
    let (before, this_run) = page
        .split_once(r#"id="this-run""#)
        .expect("this run marked");
    assert!(before.contains("Fix the test.") && before.contains("sh test.sh"));
    assert!(this_run.contains("Add follow-up notes.") && this_run.contains("&gt; NOTES.md"));
    assert!(!this_run.contains("Fix the test."), "{page}");
    assert_eq!(two["result"]["changedFiles"], json!(["NOTES.md"]));
    let branch = format!("handoff/{second_id}");
    assert_eq!(two["result"]["branch"], json!(branch));
    assert!(stack
        .forge
        .file_on_branch("acme", &name, &branch, "NOTES.md")
        .is_some());
}

/// A run that fails after its agent's turn keeps what it did: here the forge refuses the pull
/// request, and the run says why, with its summary, pushed branch and conversation.
#[tokio::test]
async fn a_refused_pull_request_fails_the_run_and_keeps_its_work() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("refused") + handoff_tests::forge::NO_PULLS;
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let result = &run["result"];
    assert_eq!(result["error"]["code"], "pr_failed", "{run:#}");
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Resource not accessible by integration")),
        "{run:#}"
    );
    let branch = format!("handoff/{run_id}");
    assert_eq!(result["branch"], json!(branch), "{run:#}");
    assert_eq!(result["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(result["summary"]
        .as_str()
        .is_some_and(|s| s.contains("Fixed add.sh")));
    assert!(result["pullRequestUrl"].is_null(), "{run:#}");
    let transcript = read(
        reqwest::get(result["transcriptUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert!(
        transcript.body.contains("sh test.sh"),
        "{}",
        transcript.body
    );
    assert!(stack
        .forge
        .file_on_branch("acme", &name, &branch, "add.sh")
        .is_some());
}

#[tokio::test]
async fn a_provider_that_keeps_failing_fails_the_run_with_its_reason() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, _) = start(&mcp, json!({"task": "Anything. [scenario:always-500]"})).await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let error = &run["result"]["error"];
    assert_eq!(error["code"], "agent_failed");
    // What the agent's turn left is kept: its usage and its conversation.
    assert!(run["result"]["tokens"].is_object(), "{run:#}");
    let url = run["result"]["transcriptUrl"]
        .as_str()
        .expect("a transcript");
    let transcript = read(reqwest::get(url).await.unwrap()).await;
    assert!(
        transcript.body.contains("scripted provider failure"),
        "{}",
        transcript.body
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("scripted provider failure"),
        "{error}"
    );
    // OpenCode's own tries (one and five retries), then handoff's four hand-backs, each met
    // by OpenCode's tries again.
    let tried = stack
        .llm
        .all_requests()
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
        .count();
    assert!(tried >= 5 * 6, "tried {tried} times");
    assert!(
        run["transitions"].as_array().is_some_and(|t| !t.is_empty()),
        "{run:#}"
    );
}

#[tokio::test]
async fn cancelling_a_working_run_stops_the_agent() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, session) = start(&mcp, json!({"task": "Take your time. [scenario:slow]"})).await;
    let run = working(&mcp, &run_id).await;
    assert_eq!(status(&run), "running", "{run:#}");

    // A run queued behind it in the same session is cancelled without ever starting.
    let (queued, _) = start(
        &mcp,
        json!({"task": "Next. [scenario:no-change]", "sessionId": session}),
    )
    .await;
    let dropped = mcp
        .call_ok("opencode_cancel_run", json!({"runId": queued}))
        .await;
    assert_eq!(dropped["cancelled"], true);
    let queued_run = mcp.get_run(&queued).await;
    let statuses: Vec<&str> = queued_run["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "cancelled"]);

    // While the run is active, a forge token scoped to it reaches its repository's pull requests.
    let name = repo_name("proxy");
    stack.broken_repo(&name);
    let forge_token = handoff_tests::links::proxy_token(
        PROXY_SECRET,
        "handoff:proxy:forge",
        &run_id,
        Some(&format!("acme/{name}")),
        600,
    );
    let pulls = read(
        reqwest::Client::new()
            .get(format!(
                "{}/proxy/forge/repos/acme/{name}/pulls",
                stack.url()
            ))
            .bearer_auth(&forge_token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(pulls.status, 200, "{}", pulls.body);
    assert_eq!(pulls.json(), json!([]));
    let seen = stack
        .forge
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.path.contains(&name))
        .expect("the forge was asked");
    assert_eq!(
        seen.authorization,
        format!("Bearer {CANARY_GITHUB_TOKEN}"),
        "the real token, swapped in by the proxy"
    );

    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancelled["cancelled"], true);
    let agents = agents_left(&mcp, &session, Duration::from_secs(10)).await;
    assert_eq!(agents, "0", "OpenCode was stopped");
    assert_eq!(status(&mcp.get_run(&run_id).await), "cancelled");
}

#[tokio::test]
async fn secrets_never_reach_the_sandbox_and_scoped_tokens_stay_in_scope() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("canary");
    let repository = stack.broken_repo(&name);
    let (run_id, session) = start(
        &mcp,
        json!({"task": "Look around, then fix the test. [scenario:env-dump]", "repository": repository}),
    )
    .await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_no_canary("the run result", &run.to_string());
    let page = read(
        reqwest::get(run["webUiUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert_no_canary("the run page", &page.body);
    let transcript = read(
        reqwest::get(run["result"]["transcriptUrl"].as_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert!(
        transcript.body.contains("OPENCODE_CONFIG_CONTENT"),
        "the agent dumped its environment"
    );
    // The agent (OpenCode and the commands it runs) is as unprivileged as any sandbox process.
    assert!(
        transcript
            .body
            .contains("AGENT-UID=1000 CapEff:0000000000000000"),
        "the agent ran with privileges"
    );
    assert_no_canary("the transcript", &transcript.body);
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let probe = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": sandbox, "command": "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ps -eo args; grep -rl canary /home/sandbox /tmp 2>/dev/null; echo done"}),
        )
        .await;
    let probe_text = probe.to_string();
    assert!(probe_text.contains("done"));
    assert_no_canary("the sandbox (environment, processes, files)", &probe_text);

    // The agent's scoped model token, as it saw it, is useless beyond its purpose.
    let token = scoped_token(&transcript.body)
        .expect("the agent's scoped token is in its environment dump");
    let http = reqwest::Client::new();
    let proxy = |path: &str| format!("{}/proxy/{path}", stack.url());
    let ended = read(
        http.post(proxy("anthropic/v1/messages"))
            .header("x-api-key", &token)
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ended.status, 401, "after the run: {}", ended.body);
    // It names the session, which has no run in progress any more.
    assert!(ended.body.contains("no run in progress"), "{}", ended.body);
    let other_service = read(
        http.post(proxy("openai/chat/completions"))
            .bearer_auth(&token)
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(other_service.status, 401, "{}", other_service.body);
    let as_git = read(
        http.get(proxy(&format!(
            "git/acme/{name}.git/info/refs?service=git-upload-pack"
        )))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(as_git.status, 401);
    // A git token for one repository does not open another.
    let git_token = handoff_tests::links::proxy_token(
        PROXY_SECRET,
        "handoff:proxy:git",
        &run_id,
        Some(&format!("acme/{name}")),
        600,
    );
    let other_repo = read(
        http.get(proxy(
            "git/acme/other.git/info/refs?service=git-upload-pack",
        ))
        .bearer_auth(&git_token)
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(other_repo.status, 401);
    assert!(
        other_repo.body.contains("another repository"),
        "{}",
        other_repo.body
    );
    let not_git = read(
        http.get(proxy(&format!("git/acme/{name}.git/objects/info/packs")))
            .bearer_auth(&git_token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(not_git.status, 404, "only smart HTTP passes");
    let forged = handoff_tests::links::proxy_token(
        "some-other-secret-0123456789abcdefghij",
        "handoff:proxy:anthropic",
        &run_id,
        None,
        600,
    );
    let bad_signature = read(
        http.post(proxy("anthropic/v1/messages"))
            .header("x-api-key", &forged)
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bad_signature.status, 401);
    let none = read(
        http.post(proxy("anthropic/v1/messages"))
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(none.status, 401);
}

/// A scoped proxy token (a JWT) found in text.
fn scoped_token(text: &str) -> Option<String> {
    let start = text
        .find("\"apiKey\\\":\\\"")
        .map(|i| i + "\"apiKey\\\":\\\"".len())
        .or_else(|| {
            text.find("\"apiKey\":\"")
                .map(|i| i + "\"apiKey\":\"".len())
        })?;
    let token: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-' || *c == '_')
        .collect();
    (token.matches('.').count() == 2).then_some(token)
}

#[tokio::test]
async fn hostile_run_input_is_refused() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let forge = stack.forge.git_url();
    let cases = [
        (
            json!({"task": "x", "repository": "https://github.com/acme/app"}),
            "127.0.0.1",
        ),
        (
            json!({"task": "x", "repository": format!("{}/acme/app", forge.replace("http://", "git://"))}),
            "repository",
        ),
        (
            json!({"task": "x", "repository": format!("{forge}/acme/app"), "branch": "--upload-pack=x"}),
            "branch",
        ),
        (
            json!({"task": "x", "repository": format!("{forge}/acme/app"), "branch": "$(id)"}),
            "branch",
        ),
        (json!({"task": "x".repeat(50_001)}), "50000"),
    ];
    for (arguments, needle) in cases {
        let text = mcp.call_err("opencode_run_task", arguments.clone()).await;
        assert!(text.contains(needle), "{text}");
    }
}

#[tokio::test]
async fn a_run_survives_a_restart_of_the_worker() {
    let mut stack = RunStack::start(&[]);
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("restart");
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(
        &mcp,
        json!({"task": "Fix the test slowly. [scenario:slow-fix]", "repository": repository}),
    )
    .await;
    let run = working(&mcp, &run_id).await;
    assert_eq!(status(&run), "running", "{run:#}");
    stack.worker.restart();
    let mcp = mcp.reconnected();
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert!(run["result"]["pullRequestUrl"].is_string());
    assert_eq!(stack.forge.pulls().len(), 1);
}

#[tokio::test]
async fn a_run_whose_sandbox_daemon_dies_fails_with_a_clear_reason() {
    // A daemon that stays away is waited for 15 s here (300 s by default).
    let mut stack = RunStack::start(&[
        ("RUN_STALL_TIMEOUT_SECONDS", "60"),
        ("RUN_DAEMON_OUTAGE_SECONDS", "15"),
    ]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, _) = start(&mcp, json!({"task": "Wait. [scenario:slow]"})).await;
    let run = working(&mcp, &run_id).await;
    assert_eq!(status(&run), "running", "{run:#}");
    stack.daemon_mut().stop();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(60), terminal)
        .await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let error = &run["result"]["error"];
    assert_eq!(error["code"], "sandbox_lost", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("sandbox daemon"),
        "{error}"
    );
}

#[tokio::test]
async fn a_session_is_continued_after_its_sandbox_slept_and_lost_its_disk() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("sleep");
    let repository = stack.broken_repo(&name);
    let (first, session) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    assert_eq!(status(&finished(&mcp, &first).await), "completed");
    // The sandbox goes to sleep (workspace and OpenCode state to R2), and its disk is lost
    // (as with a new container).
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let paused = mcp
        .call_ok("sandbox_pause", json!({"sandboxId": sandbox}))
        .await;
    assert_eq!(paused["status"], "paused");
    let dir = stack.daemon().sandboxes().join(&sandbox);
    handoff_tests::remove_scratch(&dir);
    assert!(!dir.exists(), "drop the sandbox's disk");
    let second = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Add follow-up notes. [scenario:followup] (after sleep)", "repository": repository, "sessionId": session}),
        )
        .await;
    let second_id = second["runId"].as_str().unwrap().to_string();
    let two = finished(&mcp, &second_id).await;
    assert_eq!(status(&two), "completed", "{two:#}");
    // The conversation came back with the snapshot: the model saw the first run's messages.
    let resumed =
        stack.llm.requests("followup").into_iter().find(|r| {
            r.run.as_deref() == Some(second_id.as_str()) && r.step == 0 && r.messages > 4
        });
    assert!(resumed.is_some(), "{:?}", stack.llm.requests("followup"));
    assert_eq!(two["result"]["changedFiles"], json!(["NOTES.md"]));
}

#[tokio::test]
async fn work_the_agent_committed_on_its_own_branch_is_published_as_the_runs_branch() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("own");
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(
        &mcp,
        json!({"task": "Fix it on your own branch. [scenario:self-commit]", "repository": repository}),
    )
    .await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    // The agent's commit is published — as the run's branch, never under a name it chose.
    let branch = format!("handoff/{run_id}");
    assert_eq!(
        run["result"]["branch"],
        json!(branch),
        "{run:#}\n{:#?}",
        stack.llm.requests("self-commit")
    );
    let pull = stack
        .forge
        .pulls()
        .into_iter()
        .find(|p| p.repo == name)
        .expect("a pull request");
    assert_eq!(pull.head, branch);
    assert_eq!(run["result"]["commits"][0]["message"], "Fix add");
    assert!(stack
        .forge
        .file_on_branch("acme", &name, &branch, "add.sh")
        .unwrap()
        .contains("$1 + $2"));
    assert!(
        stack
            .forge
            .file_on_branch("acme", &name, "agent/own-branch", "add.sh")
            .is_none(),
        "the agent's branch name reached the forge"
    );
}

#[tokio::test]
async fn a_run_can_use_an_openai_compatible_model() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("openai");
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository, "model": "openai/gpt-scripted"}),
    )
    .await;
    let run = finished(&mcp, &run_id).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_eq!(run["model"], "openai/gpt-scripted");
    assert!(run["result"]["pullRequestUrl"].is_string());
    let requests: Vec<_> = stack
        .llm
        .requests("fix-add")
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
        .collect();
    assert!(requests.len() >= 4, "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r.api_key == CANARY_OPENAI_KEY && r.model == "gpt-scripted"),
        "the OpenAI-compatible API got the real key: {requests:?}"
    );
}

#[tokio::test]
async fn a_follow_up_after_a_cancel_carries_out_its_own_instruction() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    // The first run's model call hangs; it is cancelled while the call is in flight.
    let (first, session) = start(&mcp, json!({"task": "Wait. [scenario:slow]"})).await;
    working(&mcp, &first).await;
    mcp.call_ok("opencode_cancel_run", json!({"runId": first}))
        .await;
    // Steering: the next instruction in the same session is carried out at once, with its own
    // answer — not the cancelled call's late reply.
    let started = std::time::Instant::now();
    let (second, _) = start(
        &mcp,
        json!({"task": "Look again. [scenario:no-change]", "sessionId": session}),
    )
    .await;
    let run = finished(&mcp, &second).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_eq!(
        run["result"]["summary"],
        json!("Nothing needed changing."),
        "{run:#}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the follow-up waited for the cancelled call: {:?}",
        started.elapsed()
    );
}
