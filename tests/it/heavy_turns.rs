//! Turns heavy with tool calls: the session reads OpenCode's messages pruned to what it follows,
//! as they stream in, then keeps only that of them as it parses. A turn dense with small values
//! (70 MiB as a whole tree) and one heavy with text (17.5 MB, over the 16 MiB one read holds)
//! are followed to their end, so is the session's next run, whose first looks reach back into
//! them, and the heavy turn's transcript is stored abridged; one too heavy for even that ends
//! saying why it has none.

use super::agent_runs::{completed, finished, start};
use handoff_tests::mcp::read;
use handoff_tests::runs::{page_saying, status, view_saying};
use handoff_tests::stack;
use handoff_tests::Mcp;
use serde_json::json;

#[tokio::test]
async fn a_turn_of_dense_tool_calls_is_followed_to_its_end() {
    let mcp = Mcp::connect(&stack::shared().url()).await;
    let (run, ..) = completed(&mcp, "dense-steps", "Fix the test, then check it.").await;
    assert_eq!(run["progress"]["steps"], 41, "{:#}", run["progress"]);
    // The numbers are in the agent's messages (OpenCode keeps a tool call's input as sent).
    let url = run["result"]["transcriptUrl"].as_str().unwrap();
    let transcript = read(reqwest::get(url).await.unwrap()).await;
    let dense = transcript.body.matches("\"notes\":[0,0,0").count();
    assert!(dense >= 40, "{dense} dense calls in the transcript");
}

#[tokio::test]
async fn a_turn_heavier_than_one_read_and_the_next_run_after_it_both_end() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let (run, session, repository) =
        completed(&mcp, "heavy-steps", "Fix the test, then check it.").await;
    assert_eq!(run["progress"]["steps"], 6, "{:#}", run["progress"]);
    assert_eq!(
        run["result"]["summary"], "Fixed add.sh in 6 steps.",
        "{run:#}"
    );
    // Its transcript, over what one read holds, is stored abridged: every message and tool
    // call, without the text beside the commands.
    assert_eq!(run["result"]["transcriptAbridged"], true, "{run:#}");
    let url = run["result"]["transcriptUrl"].as_str().unwrap();
    let transcript = read(reqwest::get(url).await.unwrap()).await;
    let messages: serde_json::Value = serde_json::from_str(&transcript.body).unwrap();
    let calls: Vec<_> = messages
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["type"] == "tool")
        .map(|p| p["state"]["input"]["command"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), 6, "{calls:?}");
    assert_eq!(calls[1..], ["true"; 5]);
    assert!(
        !transcript.body.contains("nnnn"),
        "{} bytes",
        transcript.body.len()
    );
    assert!(transcript.body.contains("Fixed add.sh in 6 steps."));
    // The run page says so beside the conversation's link.
    page_saying(&run, "(abridged: the whole was over 16 MiB").await;
    // And so does the conversation, which shows every step with its command.
    let conversation =
        view_saying(&run, "conversation", "Abridged: the whole was over 16 MiB").await;
    assert_eq!(conversation.matches("<code>bash</code>").count(), 6);
    // The session's next run: its first looks at the latest messages take in the heavy ones.
    let (next_id, _) = start(
        &mcp,
        json!({"task": "Add follow-up notes. [scenario:followup]", "repository": repository,
            "sessionId": session}),
    )
    .await;
    let next = finished(&mcp, &next_id).await;
    assert_eq!(status(&next), "completed", "{next:#}");
    assert_eq!(next["progress"]["steps"], 1, "{:#}", next["progress"]);
    // The text really is in the agent's messages, more of it than one read may take.
    let calls = stack.llm.requests("heavy-steps");
    let last = calls.last().expect("the model was called");
    assert!(
        last.bytes > 16 << 20,
        "the last model call took {} bytes",
        last.bytes
    );
}

#[tokio::test]
async fn a_conversation_too_heavy_to_store_even_abridged_says_why_it_has_none() {
    let mcp = Mcp::connect(&stack::shared().url()).await;
    let (run, ..) = completed(&mcp, "heavy-patterns", "Check it.").await;
    assert_eq!(run["result"]["summary"], "Checked 5 times.", "{run:#}");
    assert!(run["result"]["transcriptUrl"].is_null(), "{run:#}");
    let why = run["result"]["transcriptMissing"]
        .as_str()
        .unwrap_or_default();
    println!("transcriptMissing: {why}");
    assert!(
        why.starts_with("the conversation could not be stored: it is over 16 MiB, and abridged")
            && why.contains("is over 16 MiB"),
        "{run:#}"
    );
    page_saying(
        &run,
        "No conversation: the conversation could not be stored",
    )
    .await;
    let link = run["webUiUrl"]
        .as_str()
        .unwrap()
        .replacen('?', "/conversation?", 1);
    let page = read(reqwest::get(&link).await.unwrap()).await;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(
        page.body.contains("it is over 16 MiB, and abridged"),
        "{}",
        page.body
    );
}
