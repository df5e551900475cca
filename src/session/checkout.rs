//! Getting the run's repository into the session's sandbox: the sandbox's spec (a name for a
//! Worker on a private address), the Worker's URL as the sandbox reaches it, and the clone — or,
//! for a session's later runs, a fetch of the run's branch — through the credential proxy,
//! with the git token added at egress.

use super::driver::{argv, Driver};
use super::git::{self, Remote};
use super::opencode;
use super::store::{self, Checkout, Current};
use crate::config;
use crate::error::{Error, Result};
use crate::runs::RunRecord;
use crate::sandbox::api::{CloneRepo, Exec};
use crate::tokens::Service;
use handoff_wire::{GitClone, SandboxSpec, WORKSPACE};
use worker::console_warn;
use worker::url::{Host, Url};

/// The name inside a sandbox under which the egress proxy reaches a Worker on a private address.
const WORKER_ALIAS: &str = "handoff-worker.internal";

impl Driver<'_> {
    /// The session sandbox's spec: default egress, plus a name for the Worker when it listens
    /// on a private address (local development), so the sandbox can reach the proxy.
    pub(super) fn sandbox_spec(&self, run: &RunRecord) -> Result<SandboxSpec> {
        let mut spec = SandboxSpec::default();
        if let Some(target) = private_origin(run.origin.as_deref()) {
            spec.hosts.insert(WORKER_ALIAS.to_string(), target);
        }
        Ok(spec)
    }

    /// The Worker's base URL as seen from inside the sandbox.
    pub(super) fn worker_url(&self, run: &RunRecord) -> Result<String> {
        let origin = config::public_url(self.env)
            .or_else(|| run.origin.clone())
            .ok_or_else(|| Error::internal("the run has no origin to reach the proxy through"))?;
        Ok(match private_origin(Some(&origin)) {
            Some(_) => format!("http://{WORKER_ALIAS}"),
            None => origin,
        })
    }

    pub(super) async fn clone_repository(
        &self,
        current: &Current,
        run: &RunRecord,
    ) -> Result<Checkout> {
        let repository = run.repository.as_deref().unwrap_or_default();
        let (owner, name) = crate::repository::split(repository, &config::forge_git_url(self.env))?;
        self.progress(current, &format!("cloning {owner}/{name}"))
            .await?;
        let sandbox = self.sandbox()?;
        let dir = clone_dir(&name);
        let git_token = self.token(current, Service::Git, Some(&format!("{owner}/{name}")))?;
        let remote = Remote::new(&self.worker_url(run)?, &owner, &name, &git_token);
        let test = argv(&["test", "-d", &format!("{dir}/.git")], None);
        let exists = sandbox.call(Exec { request: test }).await?.exit_code == Some(0);
        if !exists {
            let request = GitClone {
                url: remote.url.clone(),
                branch: run.branch.clone(),
                depth: None,
                dir: Some(dir.clone()),
                credentials: vec![remote.credential.clone()],
                timeout_ms: 10 * 60 * 1000,
            };
            let result = sandbox.call(CloneRepo { request }).await?;
            if result.exit_code != Some(0) {
                return Err(Error::invalid(format!(
                    "git clone of {owner}/{name} failed: {}",
                    opencode::truncate(result.stderr.trim(), 600)
                )));
            }
        } else if let Some(branch) = &run.branch {
            // The explicit URL, not `origin`: the agent may have pointed that elsewhere.
            git::run(
                &sandbox,
                &dir,
                &["fetch", "-q", &remote.url, branch],
                Some(&remote),
            )
            .await?;
            git::run(
                &sandbox,
                &dir,
                &["checkout", "-q", "-B", branch, "FETCH_HEAD"],
                None,
            )
            .await?;
        }
        let (branch, commit) = futures::try_join!(
            git::run(&sandbox, &dir, &["rev-parse", "--abbrev-ref", "HEAD"], None),
            git::run(&sandbox, &dir, &["rev-parse", "HEAD"], None),
        )?;
        let base_branch = branch.stdout.trim().to_string();
        let base_commit = commit.stdout.trim().to_string();
        Ok(Checkout {
            owner,
            name,
            dir,
            base_branch,
            base_commit,
        })
    }

    /// The folder a run works in: its repository's clone, or the workspace when it has none.
    pub(super) fn work_dir(&self, run: &RunRecord) -> Result<String> {
        Ok(match run.repository.as_deref() {
            Some(repository) => {
                let forge = config::forge_git_url(self.env);
                clone_dir(&crate::repository::split(repository, &forge)?.1)
            }
            None => WORKSPACE.to_string(),
        })
    }

    /// Clears the empty repository a spare's warm-up left (`spare.rs`) as the session's first
    /// run prepares: from the run's folder, so the clone goes there (and OpenCode, which served
    /// the warm-up there, already knows the folder), or as a whole when the run works
    /// elsewhere. Only a repository without commits and beside nothing else in its folder is
    /// cleared.
    pub(super) async fn clear_warm_repo(&self, run: &RunRecord) -> Result<()> {
        let mut meta = store::meta(&self.sql)?;
        let Some(warmed) = meta.warm_repo.take() else {
            return Ok(());
        };
        let keep = if warmed == self.work_dir(run)? {
            "keep"
        } else {
            "remove"
        };
        let request = argv(&["sh", "-c", CLEAR_WARM_REPO, "sh", &warmed, keep], None);
        let cleared = self.sandbox()?.call(Exec { request }).await?;
        if cleared.exit_code != Some(0) {
            console_warn!(
                "session {}: warm-up repository {warmed} not cleared: {}",
                self.session_id,
                cleared.stderr.trim()
            );
        }
        store::save_meta(&self.sql, &meta)
    }
}

/// Removes the empty repository in `$1` (then the folder too unless `$2` is `keep`); leaves
/// alone a folder holding anything else or a repository with commits.
const CLEAR_WARM_REPO: &str = r#"cd "$1" 2>/dev/null || exit 0
[ "$(ls -A)" = .git ] || exit 0
git rev-parse -q --verify HEAD >/dev/null && exit 0
rm -rf .git || exit 1
[ "$2" = keep ] || rmdir "$1""#;

/// Where a repository named `name` is cloned.
fn clone_dir(name: &str) -> String {
    format!("{WORKSPACE}/{name}")
}

/// `host:port` of an origin on a loopback or private address (IPv4, IPv6 or a `localhost`
/// name), which a sandbox can only reach through a configured name.
fn private_origin(origin: Option<&str>) -> Option<String> {
    let url = Url::parse(origin?).ok()?;
    let port = url.port_or_known_default()?;
    match url.host()? {
        Host::Domain(name) if name == "localhost" || name.ends_with(".localhost") => {
            Some(format!("{name}:{port}"))
        }
        Host::Ipv4(ip) if ip.is_loopback() || ip.is_private() || ip.is_link_local() => {
            Some(format!("{ip}:{port}"))
        }
        // Loopback, unique local (fc00::/7) and link-local (fe80::/10).
        Host::Ipv6(ip)
            if ip.is_loopback()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80 =>
        {
            Some(format!("[{ip}]:{port}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_origins_get_an_alias_target() {
        assert_eq!(
            private_origin(Some("http://127.0.0.1:8787")).as_deref(),
            Some("127.0.0.1:8787")
        );
        assert_eq!(
            private_origin(Some("http://localhost")).as_deref(),
            Some("localhost:80")
        );
        assert_eq!(
            private_origin(Some("https://handoff.example.workers.dev")),
            None
        );
        assert_eq!(
            private_origin(Some("http://[::1]:8787/mcp")).as_deref(),
            Some("[::1]:8787")
        );
        assert_eq!(
            private_origin(Some("https://[fd00::5]")).as_deref(),
            Some("[fd00::5]:443")
        );
        assert_eq!(
            private_origin(Some("http://10.1.2.3:9000")).as_deref(),
            Some("10.1.2.3:9000")
        );
        assert_eq!(private_origin(Some("http://[2001:db8::1]:80")), None);
        assert_eq!(private_origin(Some("http://8.8.8.8")), None);
        assert_eq!(private_origin(Some("not a url")), None);
        assert_eq!(private_origin(None), None);
    }
}
