//! `handoff-demo`: the keyless demo's stand-ins — the scripted LLM and a local forge holding
//! `demo/calculator`, a repository with a failing test. `cargo xtask dev --demo` starts it and
//! points the Worker at it. It prints one JSON line with the addresses and credentials to use,
//! then serves until it is stopped. Never part of a production deployment.

use handoff_tests::forge::Forge;
use handoff_tests::llm::ScriptedLlm;
use serde_json::json;
use std::path::PathBuf;

/// The demo's "real" credentials: local values the stand-ins check, not secrets.
const DEMO_FORGE_TOKEN: &str = "demo-forge-token";
const DEMO_LLM_KEY: &str = "demo-llm-key";

fn main() {
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
