//! After the agent is done: commit what it changed on `handoff/<runId>`, push that branch
//! through the credential proxy (whatever branch the agent committed on, `HEAD` is published
//! as `handoff/<runId>` and nothing else), open a pull request with the forge's API, and
//! collect commits, changed files and the diffstat. Git runs inside the sandbox with argv only
//! and without the agent's hooks or global config (`git.rs`); the token is added at egress;
//! the forge API is called by the Worker with the real token.

use super::git::{self, Remote};
use super::store::Checkout;
use crate::config;
use crate::error::{Error, Result};
use crate::runs::Commit;
use crate::sandbox::api::{Exec, ReadFile, SandboxClient, WriteFile};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::ExecRequest;
use serde_json::json;
use std::collections::BTreeMap;
use worker::{Env, Method};

/// Who handoff's own commits are by.
const AUTHOR: [&str; 4] = [
    "-c",
    "user.name=handoff",
    "-c",
    "user.email=handoff@users.noreply.github.com",
];

/// What was pushed for a run.
pub struct Pushed {
    pub branch: String,
    pub commits: Vec<Commit>,
    pub changed_files: Vec<String>,
    pub diffstat: Option<String>,
    /// Untracked by-products (`git::BY_PRODUCTS`) that were not committed.
    pub left_out: Vec<String>,
    /// The change as a unified diff (`None` when it could not be read).
    pub diff: Option<String>,
}

/// The phase a failure happened in, with its message.
pub struct Failure {
    pub phase: &'static str,
    pub error: Error,
}

/// The phase of a failure while committing (before anything is pushed).
pub const COMMITTING: &str = "committing";

fn fail(phase: &'static str) -> impl Fn(Error) -> Failure {
    move |error| Failure { phase, error }
}

/// `git <args>` in the checkout while committing; its trimmed output.
async fn committing(
    sandbox: &SandboxClient,
    dir: &str,
    args: &[&str],
) -> std::result::Result<String, Failure> {
    let result = git::run(sandbox, dir, args, None)
        .await
        .map_err(fail(COMMITTING))?;
    Ok(result.stdout.trim().to_string())
}

/// [`committing`] for a command that writes the index. A lock that an earlier git left behind
/// (the agent's, killed midway at its command's timeout) fails it: the lock is removed when
/// no git runs in the sandbox, and the command tried once more.
async fn writing_index(
    sandbox: &SandboxClient,
    dir: &str,
    args: &[&str],
) -> std::result::Result<String, Failure> {
    match committing(sandbox, dir, args).await {
        Err(failure)
            if failure.error.message.contains("index.lock")
                && clear_stale_lock(sandbox, dir).await =>
        {
            committing(sandbox, dir, args).await
        }
        done => done,
    }
}

/// Removes the checkout's `.git/index.lock` unless a git process runs in the sandbox (read
/// from `/proc`, which every sandbox has); whether it did.
const CLEAR_STALE_LOCK: &str = "for comm in /proc/[0-9]*/comm; do \
     read -r name < \"$comm\" && [ \"$name\" = git ] && exit 3; done 2>/dev/null; \
     rm -f .git/index.lock";

async fn clear_stale_lock(sandbox: &SandboxClient, dir: &str) -> bool {
    let request = ExecRequest {
        command: String::new(),
        argv: Some(
            ["/bin/sh", "-c", CLEAR_STALE_LOCK]
                .map(String::from)
                .to_vec(),
        ),
        cwd: Some(dir.to_string()),
        env: BTreeMap::new(),
        timeout_ms: 10_000,
        credentials: Vec::new(),
    };
    let cleared = sandbox.call(Exec { request }).await;
    cleared.is_ok_and(|r| r.exit_code == Some(0))
}

/// Commits what the agent changed and pushes it as `handoff/<runId>`; `None` when nothing
/// changed. Commands that do not depend on each other run at once (each is a round trip to the
/// sandbox): the checks before staging, the two listings after it, and — once the commit is
/// known — the push beside reading the commits, files, diffstat and diff.
pub async fn push(
    sandbox: &SandboxClient,
    checkout: &Checkout,
    run_id: &str,
    title: &str,
    summary: &str,
    remote: &Remote,
) -> std::result::Result<Option<Pushed>, Failure> {
    let dir = checkout.dir.as_str();
    let own_branch = format!("handoff/{run_id}");
    let left_out = commit(sandbox, checkout, &own_branch, run_id, title, summary).await?;
    let range = format!("{}..HEAD", checkout.base_commit);
    if committing(sandbox, dir, &["rev-list", "--count", &range]).await? == "0" {
        return Ok(None);
    }
    // Forced: a push repeated after a restart replaces the run's own branch, and only that.
    let refspec = format!("+HEAD:refs/heads/{own_branch}");
    let pushing = async {
        git::run(
            sandbox,
            dir,
            &["push", "-q", "--no-verify", &remote.url, &refspec],
            Some(remote),
        )
        .await
        .map_err(fail("pushing"))
    };
    let diff = ["diff", "--no-ext-diff", "--no-textconv"];
    let names = [&diff[..], &["--name-only", &range]].concat();
    let stat = [&diff[..], &["--shortstat", &range]].concat();
    let log = ["log", "--format=%H%x09%s", &range];
    let (log, files, stat, diff, _) = futures::try_join!(
        committing(sandbox, dir, &log),
        committing(sandbox, dir, &names),
        committing(sandbox, dir, &stat),
        async { Ok(read_diff(sandbox, dir, &range).await) },
        pushing,
    )?;
    let commits = log
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(sha, message)| Commit {
            sha: sha.to_string(),
            message: message.to_string(),
        })
        .collect();
    Ok(Some(Pushed {
        branch: own_branch,
        commits,
        changed_files: files.lines().map(str::to_string).collect(),
        diffstat: Some(stat).filter(|s| !s.is_empty()),
        left_out,
        diff,
    }))
}

/// Commits what changed in the checkout, on `own_branch` when the agent left it on the base
/// branch; what the by-product rules kept out.
async fn commit(
    sandbox: &SandboxClient,
    checkout: &Checkout,
    own_branch: &str,
    run_id: &str,
    title: &str,
    summary: &str,
) -> std::result::Result<Vec<String>, Failure> {
    let dir = checkout.dir.as_str();
    // The by-product rules are written afresh each time: the file is in the sandbox, where the
    // agent could have changed it.
    let excludes = async {
        sandbox
            .call(WriteFile {
                path: git::BY_PRODUCTS_FILE.to_string(),
                base64: B64.encode(git::BY_PRODUCTS),
            })
            .await
            .map_err(fail(COMMITTING))
    };
    let (status, branch, excludes) = futures::join!(
        committing(sandbox, dir, &["status", "--porcelain"]),
        committing(sandbox, dir, &["rev-parse", "--abbrev-ref", "HEAD"]),
        excludes,
    );
    // Nothing to commit needs neither the branch nor the rules (a full disk may refuse them).
    if status?.is_empty() {
        return Ok(Vec::new());
    }
    let branch = branch?;
    excludes?;
    if branch == checkout.base_branch || branch == "HEAD" {
        writing_index(sandbox, dir, &["checkout", "-q", "-B", own_branch]).await?;
    }
    // `git add -A` with the by-product rules as excludes (they apply to untracked files only,
    // so a repository that tracks such a path keeps its changes).
    let excludes = format!("core.excludesFile={}", git::BY_PRODUCTS_FILE);
    writing_index(sandbox, dir, &["-c", &excludes, "add", "-A"]).await?;
    // What is still untracked and not ignored by the repository is what the rules kept out.
    let untracked = ["ls-files", "--others", "--exclude-standard", "--directory"];
    let (left_out, staged) = futures::try_join!(
        committing(sandbox, dir, &untracked),
        committing(sandbox, dir, &["diff", "--cached", "--name-only"]),
    )?;
    if !staged.is_empty() {
        let message = format!(
            "{title}\n\n{}\n\nhandoff run {run_id}",
            super::opencode::truncate(summary, 2000)
        );
        let mut args: Vec<&str> = AUTHOR.to_vec();
        args.extend(["commit", "-q", "-m", &message]);
        committing(sandbox, dir, &args).await?;
    }
    Ok(left_out.lines().map(str::to_string).collect())
}

/// Below this much free space the sandbox's disk counts as full when a commit or push fails:
/// git's messages do not always say so (a directory it could not create on a full disk is
/// reported as missing), and nothing gets done in the last few MiB.
const FULL_BELOW_KIB: u64 = 8 * 1024;

/// Whether the file system holding `dir` in the sandbox has less than [`FULL_BELOW_KIB`] free,
/// by `df`; `false` when that cannot be told.
pub async fn disk_is_full(sandbox: &SandboxClient, dir: &str) -> bool {
    let request = ExecRequest {
        command: String::new(),
        argv: Some(["df", "-Pk", "--", dir].map(String::from).to_vec()),
        cwd: None,
        env: BTreeMap::new(),
        timeout_ms: 10_000,
        credentials: Vec::new(),
    };
    match sandbox.call(Exec { request }).await {
        Ok(df) if df.exit_code == Some(0) => {
            available_kib(&df.stdout).is_some_and(|free| free < FULL_BELOW_KIB)
        }
        _ => false,
    }
}

/// The free KiB in `df -Pk` output (the fourth column of its one line after the header).
fn available_kib(df: &str) -> Option<u64> {
    df.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()
}

/// Where the unified diff is written inside the checkout (under `.git`, so never committed).
const DIFF_FILE: &str = ".git/handoff-run.diff";

/// The change as a unified diff: written to a file by git, then read whole (command output
/// would be cut to its head and tail). Best effort: a run never fails for want of it.
async fn read_diff(sandbox: &SandboxClient, dir: &str, range: &str) -> Option<String> {
    let output = format!("--output={DIFF_FILE}");
    let args = [
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        &output,
        range,
    ];
    git::run(sandbox, dir, &args, None).await.ok()?;
    let read = ReadFile {
        path: format!("{dir}/{DIFF_FILE}"),
        encoding: handoff_wire::Encoding::Text,
        max: None,
    };
    sandbox.call(read).await.ok().map(|file| file.content)
}

/// `POST /repos/{owner}/{repo}/pulls` with the agent's summary and a link to the run; an
/// existing pull request for the branch is reused.
pub async fn open_pull_request(
    env: &Env,
    checkout: &Checkout,
    branch: &str,
    title: &str,
    summary: &str,
    run_id: &str,
    run_page: &str,
) -> Result<String> {
    let body = format!(
        "{summary}\n\n---\nOpened by handoff for run `{run_id}`. [The run]({run_page}) (for the \
         deployment's owner: sign-in required)."
    );
    let token = config::get(env, config::GITHUB_TOKEN).ok_or_else(|| {
        Error::not_configured(format!(
            "{} is not set: cannot open the pull request",
            config::GITHUB_TOKEN
        ))
    })?;
    let base = format!(
        "{}/repos/{}/{}/pulls",
        config::forge_api_url(env),
        checkout.owner,
        checkout.name
    );
    let payload =
        json!({"title": title, "head": branch, "base": checkout.base_branch, "body": body});
    let (status, reply) = crate::forge::call(&token, Method::Post, &base, Some(payload)).await?;
    if let Some(url) = reply["html_url"]
        .as_str()
        .filter(|_| (200..300).contains(&status))
    {
        return Ok(url.to_string());
    }
    if status == 422 {
        let query = format!("{base}?head={}:{branch}&state=open", checkout.owner);
        let (_, list) = crate::forge::call(&token, Method::Get, &query, None).await?;
        if let Some(url) = list[0]["html_url"].as_str() {
            return Ok(url.to_string());
        }
    }
    Err(Error::unavailable(format!(
        "the forge refused the pull request (HTTP {status}): {}",
        reply["message"].as_str().unwrap_or("no message")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_read_from_df() {
        let df = "Filesystem     1024-blocks  Used Available Capacity Mounted on\n\
                  /dev/loop3          194241 194241         0     100% /home/sandbox\n";
        assert_eq!(available_kib(df), Some(0));
        let roomy = "Filesystem 1024-blocks Used Available Capacity Mounted on\n\
                     overlay 51290592 9371212 39281556 20% /\n";
        assert_eq!(available_kib(roomy), Some(39_281_556));
        assert_eq!(
            available_kib("df: /nowhere: No such file or directory\n"),
            None
        );
        assert_eq!(available_kib(""), None);
    }
}
