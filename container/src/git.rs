//! Git in a sandbox: clone and checkout, run inside the sandbox (so the network goes through
//! its egress proxy) with arguments passed as argv, never through a shell, without hooks or
//! system/global configuration. Credentials for the clone are added by the egress proxy; git
//! never holds them.

use crate::error::{ApiError, Result};
use crate::exec;
use crate::files;
use crate::sandbox::{Registry, Sandbox};
use handoff_wire::{is_safe_branch, ExecResult, GitCheckout, GitClone};
use std::collections::BTreeMap;
use std::sync::Arc;

const DEFAULT_TIMEOUT_MS: u64 = 5 * 60 * 1000;

fn check_url(url: &str) -> Result<()> {
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() <= 2000
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "repository URLs must be http(s) URLs without spaces or control characters",
        ))
    }
}

fn check_branch(branch: &str) -> Result<()> {
    if is_safe_branch(branch) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{branch:?} is not an acceptable branch name: letters, digits and ._/- only, not \
             starting with - / or ., without .. or //"
        )))
    }
}

/// Git's environment for the daemon's own git commands: no prompts, no system or global
/// configuration (both are the sandbox's to plant).
fn git_env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
        ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
        ("GIT_CONFIG_GLOBAL".to_string(), "/dev/null".to_string()),
    ])
}

/// The directory a clone lands in by default: the repository's last path segment.
fn default_dir(url: &str) -> String {
    let last = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("repo");
    let name = last.strip_suffix(".git").unwrap_or(last);
    if name.is_empty() || name.starts_with('.') {
        "repo".into()
    } else {
        name.into()
    }
}

pub async fn clone(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    req: &GitClone,
) -> Result<ExecResult> {
    check_url(&req.url)?;
    let dir = files::resolve(req.dir.as_deref().unwrap_or(&default_dir(&req.url)))?;
    if dir.relative.as_os_str().is_empty() {
        return Err(ApiError::bad_request(
            "clone into a directory inside the workspace, not the workspace itself",
        ));
    }
    let mut argv: Vec<String> = vec![
        "git".into(),
        "-c".into(),
        "core.hooksPath=/dev/null".into(),
        "clone".into(),
    ];
    if let Some(branch) = &req.branch {
        check_branch(branch)?;
        argv.extend(["--branch".into(), branch.clone()]);
    }
    if let Some(depth) = req.depth {
        if depth == 0 {
            return Err(ApiError::bad_request("depth must be at least 1"));
        }
        argv.extend(["--depth".into(), depth.to_string()]);
    }
    argv.extend(["--".into(), req.url.clone(), sandbox.path_inside(&dir)]);
    let timeout = if req.timeout_ms == 0 {
        DEFAULT_TIMEOUT_MS
    } else {
        req.timeout_ms
    };
    let _credentials = sandbox.credentials.grant(&req.credentials)?;
    exec::run_argv(registry, sandbox, &argv, None, &git_env(), timeout).await
}

pub async fn checkout(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    req: &GitCheckout,
) -> Result<ExecResult> {
    check_branch(&req.branch)?;
    let mut argv: Vec<String> = vec!["git".into(), "checkout".into()];
    if req.create {
        argv.push("-b".into());
    }
    argv.push(req.branch.clone());
    argv.push("--".into());
    let env = git_env();
    exec::run_argv(
        registry,
        sandbox,
        &argv,
        Some(&req.dir),
        &env,
        DEFAULT_TIMEOUT_MS,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_dirs_and_headers() {
        assert!(check_url("https://github.com/a/b.git").is_ok());
        assert!(check_url("--upload-pack=x").is_err());
        assert!(check_url("ext::sh -c id").is_err());
        assert!(check_url("https://x/a b").is_err());
        assert_eq!(default_dir("https://github.com/a/widgets.git"), "widgets");
        assert_eq!(default_dir("https://github.com/a/widgets/"), "widgets");
        assert!(check_branch("$(id)").is_err());
    }
}
