//! MCP prompts (slash commands in clients) and `completion/complete` for their arguments.

use crate::base;
use handoff_tests::Mcp;
use serde_json::json;

#[tokio::test]
async fn prompts_are_listed_and_filled_in() {
    let mcp = Mcp::connect(&base()).await;
    let listed = mcp.request("prompts/list", json!({})).await;
    let prompts = listed["result"]["prompts"].as_array().unwrap();
    let names: Vec<&str> = prompts
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["delegate", "continue_session", "review_run"]);
    let delegate = &prompts[0];
    assert_eq!(delegate["arguments"][0]["name"], "task");
    assert_eq!(delegate["arguments"][0]["required"], true);

    let got = mcp
        .request(
            "prompts/get",
            json!({"name": "delegate", "arguments": {"task": "Fix the \"flaky\" test", "repository": "https://forge.example/acme/app"}}),
        )
        .await;
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("opencode_run_task"), "{text}");
    assert!(
        text.contains(r#""task":"Fix the \"flaky\" test""#),
        "arguments are JSON-quoted: {text}"
    );
    assert!(text.contains("https://forge.example/acme/app"));
    assert_eq!(got["result"]["messages"][0]["role"], "user");

    for (params, says) in [
        (json!({"name": "delegate", "arguments": {}}), "task"),
        (
            json!({"name": "delegate", "arguments": {"task": "x", "evil": "y"}}),
            "evil",
        ),
        (json!({"name": "nope"}), "unknown prompt"),
        (json!({}), "name"),
    ] {
        let refused = mcp.request("prompts/get", params.clone()).await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(says),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn completions_offer_recent_ids_by_prefix() {
    let mcp = Mcp::connect(&base()).await;
    let (run_id, session_id) = mcp.start_run("Be completed").await;
    let complete = |name: &str, value: &str, reference| {
        let params = json!({"ref": reference, "argument": {"name": name, "value": value}});
        let mcp = &mcp;
        async move { mcp.request("completion/complete", params).await }
    };
    let runs = complete(
        "runId",
        &run_id[..10],
        json!({"type": "ref/prompt", "name": "review_run"}),
    )
    .await;
    let values = runs["result"]["completion"]["values"].as_array().unwrap();
    assert!(values.contains(&json!(run_id)), "{runs}");
    assert!(values
        .iter()
        .all(|v| v.as_str().unwrap().starts_with(&run_id[..10])));
    let sessions = complete(
        "sessionId",
        "ses_",
        json!({"type": "ref/prompt", "name": "continue_session"}),
    )
    .await;
    assert!(sessions["result"]["completion"]["values"]
        .as_array()
        .unwrap()
        .contains(&json!(session_id)));
    let template = complete(
        "runId",
        &run_id,
        json!({"type": "ref/resource", "uri": "handoff://runs/{runId}"}),
    )
    .await;
    assert_eq!(template["result"]["completion"]["values"], json!([run_id]));
    let nothing = complete(
        "runId",
        "zzz",
        json!({"type": "ref/prompt", "name": "review_run"}),
    )
    .await;
    assert_eq!(nothing["result"]["completion"]["values"], json!([]));
    let bad = complete("runId", "", json!({"type": "ref/other"})).await;
    assert_eq!(bad["error"]["code"], -32602);
}
