//! `handoff-demo`: the keyless demo's stand-ins — the scripted LLM and a local forge holding
//! `demo/calculator`, a repository with a failing test. `cargo xtask dev --demo` starts it and
//! points the Worker at it. It prints one JSON line with the addresses and credentials to use,
//! then serves until it is stopped. Never part of a production deployment.
//!
//! `handoff-demo deploy-workers <base URL> <API token>` deploys the example workers of
//! `examples/workers/` to a running handoff (what `cargo xtask dev --demo` does once it is up).

use handoff_tests::forge::Forge;
use handoff_tests::llm::ScriptedLlm;
use serde_json::json;
use std::path::PathBuf;

/// The demo's "real" credentials: local values the stand-ins check, not secrets.
const DEMO_FORGE_TOKEN: &str = "demo-forge-token";
const DEMO_LLM_KEY: &str = "demo-llm-key";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("deploy-workers") {
        let (Some(base), Some(token)) = (args.get(2), args.get(3)) else {
            eprintln!("usage: handoff-demo deploy-workers <base URL> <API token>");
            std::process::exit(2);
        };
        return deploy_workers(base, token);
    }
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("handoff-demo"));
    let forge = Forge::start(root.join("forge"), DEMO_FORGE_TOKEN);
    let repository = forge.create_repo(
        "demo",
        "calculator",
        &[
            ("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n"),
            (
                "test.sh",
                "#!/bin/sh\nif [ \"$(sh add.sh 2 3)\" = \"5\" ]; then echo PASS; else echo FAIL; exit 1; fi\n",
            ),
            ("README.md", "# calculator\n\n`sh test.sh` runs the test. It fails: add.sh subtracts.\n"),
        ],
    );
    let llm = ScriptedLlm::start(DEMO_LLM_KEY);
    let line = json!({
        "repository": repository,
        "task": "The test in test.sh fails. Find the bug, fix it and make the test pass. [scenario:demo]",
        "vars": {
            "FORGE_GIT_URL": forge.git_url(),
            "FORGE_API_URL": forge.api_url(),
            "GITHUB_TOKEN": DEMO_FORGE_TOKEN,
            "ANTHROPIC_BASE_URL": llm.url(),
            "ANTHROPIC_API_KEY": DEMO_LLM_KEY,
            "HANDOFF_DEFAULT_MODEL": "anthropic/claude-sonnet-4-5",
        }
    });
    println!("{line}");
    loop {
        std::thread::park();
    }
}

/// Deploys every example worker and says how to try each.
fn deploy_workers(base: &str, token: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let mcp = handoff_tests::Mcp::connect_as(base, token, "2025-11-25").await;
        for (folder, files) in handoff_tests::workers::examples() {
            let reply = mcp.call("workers_deploy", json!({"files": files})).await;
            let result = &reply["result"];
            if result["isError"] == json!(true) {
                eprintln!(
                    "example worker {folder} was refused: {}",
                    result["content"][0]["text"]
                );
                std::process::exit(1);
            }
            let out = &result["structuredContent"];
            println!(
                "  deployed example worker {} v{}",
                out["worker"]["name"].as_str().unwrap_or_default(),
                out["version"]["version"]
            );
        }
    });
}
