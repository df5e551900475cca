//! handoff's own git commands in a session's sandbox, and the remote they talk to.
//!
//! The repository is the agent's: its config, hooks, attributes and the sandbox user's global
//! config are all planted by code nobody reviewed. So every command handoff runs ignores what
//! it can (system and global config, hooks, fsmonitor, credential helpers, extra headers,
//! protocols other than http(s), pagers, editors, signing, external diff and textconv, embedded
//! bare repositories), talks to an explicit URL rather than a remote the agent may have
//! changed, and never holds the git token: the sandbox's egress proxy adds it to requests for
//! the run's repository while the command runs ([`Remote::credential`]). What the repository's
//! own config can still do (a clean filter, say) runs as the sandbox user with no credential in
//! reach — and the credential proxy lets the token update only `refs/heads/handoff/<runId>`.

use crate::error::{Error, Result};
use crate::sandbox::api::{Exec, SandboxClient};
use handoff_wire::{EgressCredential, ExecRequest, ExecResult};
use std::collections::BTreeMap;

const GIT_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// `-c` settings before every subcommand; command-line settings win over any file.
const HARDENING: [&str; 21] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "core.pager=cat",
    "core.editor=true",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "http.extraHeader=",
    "protocol.allow=never",
    "protocol.http.allow=always",
    "protocol.https.allow=always",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "safe.bareRepository=explicit",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
];

/// By-products of building and testing that never belong in a pull request, in gitignore
/// syntax. They are kept out of the agent's own commits (its git reads them as its global
/// excludes) and out of handoff's commit; the result lists what was left out.
pub const BY_PRODUCTS: &str =
    "__pycache__/\n*.pyc\n*.pyo\n.pytest_cache/\nnode_modules/\n.DS_Store\ntarget/\n";

/// Where handoff writes `BY_PRODUCTS` before committing, outside every checkout.
pub const BY_PRODUCTS_FILE: &str = "/home/sandbox/.handoff/git-excludes";

/// The run's repository as the sandbox reaches it, with the credential the egress proxy adds.
pub struct Remote {
    /// The URL git is given: plain `http://`, so the proxy can add the credential (it goes on
    /// to the Worker over https when the Worker's URL is https).
    pub url: String,
    pub credential: EgressCredential,
}

impl Remote {
    /// `worker_url` is the Worker's base URL as the sandbox reaches it.
    pub fn new(worker_url: &str, owner: &str, name: &str, git_token: &str) -> Remote {
        let upstream = format!("{worker_url}/proxy/git/{owner}/{name}.git");
        let url = match upstream.strip_prefix("https://") {
            Some(rest) => format!("http://{rest}"),
            None => upstream.clone(),
        };
        Remote {
            credential: EgressCredential {
                prefix: format!("{url}/"),
                upstream: format!("{upstream}/"),
                header: format!("Authorization: Bearer {git_token}"),
            },
            url,
        }
    }
}

/// The argv of `git <args>` with every hardening setting.
pub fn argv(args: &[&str]) -> Vec<String> {
    let mut argv = vec!["git".to_string()];
    for setting in HARDENING {
        argv.push("-c".into());
        argv.push(setting.into());
    }
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

/// The environment of handoff's git commands: no prompt, no system or global config.
pub fn env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
        ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
        ("GIT_CONFIG_GLOBAL".to_string(), "/dev/null".to_string()),
        ("GIT_ATTR_NOSYSTEM".to_string(), "1".to_string()),
    ])
}

/// Runs `git <args>` in `dir` (with `remote`'s credential added at egress, if given); fails
/// with git's stderr.
pub async fn run(
    sandbox: &SandboxClient,
    dir: &str,
    args: &[&str],
    remote: Option<&Remote>,
) -> Result<ExecResult> {
    let request = ExecRequest {
        command: String::new(),
        argv: Some(argv(args)),
        cwd: Some(dir.to_string()),
        env: env(),
        timeout_ms: GIT_TIMEOUT_MS,
        credentials: remote
            .map(|r| vec![r.credential.clone()])
            .unwrap_or_default(),
    };
    let result = sandbox.call(Exec { request }).await?;
    if result.exit_code == Some(0) {
        Ok(result)
    } else {
        Err(Error::internal(format!(
            "git {} failed: {}",
            subcommand(args),
            super::opencode::truncate(result.stderr.trim(), 600)
        )))
    }
}

/// The subcommand in `args` (after any `-c name=value` pairs).
fn subcommand<'a>(args: &[&'a str]) -> &'a str {
    let mut rest = args;
    while let ["-c", _, tail @ ..] = rest {
        rest = tail;
    }
    rest.first().copied().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_subcommand_after_settings() {
        assert_eq!(subcommand(&["-c", "a=b", "-c", "c=d", "add", "-A"]), "add");
        assert_eq!(subcommand(&["push"]), "push");
        assert_eq!(subcommand(&[]), "");
    }

    #[test]
    fn remotes_are_plain_http_inside_and_keep_https_upstream() {
        let local = Remote::new("http://handoff-worker.internal", "acme", "app", "tok");
        assert_eq!(
            local.url,
            "http://handoff-worker.internal/proxy/git/acme/app.git"
        );
        assert_eq!(local.credential.prefix, format!("{}/", local.url));
        assert_eq!(local.credential.upstream, local.credential.prefix);
        let public = Remote::new("https://handoff.example.com", "acme", "app", "tok");
        assert_eq!(
            public.url,
            "http://handoff.example.com/proxy/git/acme/app.git"
        );
        assert_eq!(
            public.credential.upstream,
            "https://handoff.example.com/proxy/git/acme/app.git/"
        );
        assert_eq!(public.credential.header, "Authorization: Bearer tok");
        let argv = argv(&["status"]);
        assert_eq!(argv.first().map(String::as_str), Some("git"));
        assert_eq!(argv.last().map(String::as_str), Some("status"));
        assert!(argv.contains(&"core.hooksPath=/dev/null".to_string()));
    }
}
