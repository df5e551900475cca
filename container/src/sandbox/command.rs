//! Starting a process in a sandbox: the program, its working directory and environment as the
//! sandbox sees them, and the confinement its child applies before it runs (namespaces and
//! user, or — without namespaces — the sandbox's host user; always no capabilities,
//! `no_new_privs` and seccomp).

use super::confine::{Confinement, Credentials};
use super::init;
use super::isolation::{Mode, PROXY_PORT, SANDBOX_PATH, SANDBOX_USER};
use super::validate::check_env;
use super::{Running, Sandbox};
use crate::error::{ApiError, Result};
use crate::files::{self, Resolved};
use handoff_wire::WORKSPACE;
use std::collections::BTreeMap;
use tokio::process::Command;

impl Sandbox {
    /// Where the workspace is, as the sandbox's processes see it.
    pub fn workspace_display(&self) -> String {
        if self.at_workspace {
            WORKSPACE.to_string()
        } else {
            self.home.display().to_string()
        }
    }

    /// A command that runs `argv` in `cwd` (a path inside the workspace) within the sandbox,
    /// as its user and under its confinement, with the sandbox's environment plus `env` —
    /// applied only to the program inside, never to anything on the host — in its own process
    /// group and cgroup.
    pub fn command(
        &self,
        running: &Running,
        argv: &[String],
        cwd: &Resolved,
        env: &BTreeMap<String, String>,
    ) -> Result<Command> {
        check_env(env)?;
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| ApiError::bad_request("argv must name a program"))?;
        let cwd = self.path_inside(cwd);
        let (namespaces, credentials) = match (self.mode, &running.namespaces) {
            (Mode::Namespaces, Some(ns)) => (Some(ns.clone()), Some(SANDBOX_USER)),
            (Mode::Namespaces | Mode::Unavailable, _) => {
                return Err(ApiError::internal("the sandbox is not running"))
            }
            (Mode::Container | Mode::None, _) => {
                (None, self.owner().map(|uid| Credentials { uid, gid: uid }))
            }
        };
        let confinement = Confinement::prepare(
            running.cgroup.clone(),
            namespaces,
            credentials,
            Some(self.seccomp.clone()),
            &cwd,
        )?;
        let mut cmd = init::confined(program, args, confinement)?;
        // Shells print `$PWD` when it names the working directory, so a workspace reached
        // through a link (`/home/sandbox` in a container) reads as the path the sandbox uses.
        let spec = self.spec();
        cmd.envs(self.base_env())
            .envs(&spec.env)
            .envs(self.secret_env(&spec))
            .env("PWD", &cwd)
            .envs(env)
            .kill_on_drop(true);
        Ok(cmd)
    }

    /// The path processes in the sandbox use for a resolved workspace path.
    pub fn path_inside(&self, resolved: &Resolved) -> String {
        if self.at_workspace {
            resolved.display.clone()
        } else {
            self.home.join(&resolved.relative).display().to_string()
        }
    }

    fn base_env(&self) -> Vec<(String, String)> {
        let path = match (&self.tools, self.mode) {
            (Some(_), Mode::Namespaces) => format!("{}:{SANDBOX_PATH}", handoff_wire::TOOLS_DIR),
            (Some(dir), _) => format!("{}:{SANDBOX_PATH}", dir.display()),
            (None, _) => SANDBOX_PATH.to_string(),
        };
        let mut env = vec![
            ("PATH".to_string(), path),
            ("HOME".to_string(), self.workspace_display()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("TERM".to_string(), "dumb".to_string()),
            ("HANDOFF_SANDBOX_ID".to_string(), self.id.clone()),
        ];
        if self.at_workspace {
            let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
            for name in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "ALL_PROXY",
            ] {
                env.push((name.to_string(), proxy.clone()));
            }
            for name in ["NO_PROXY", "no_proxy"] {
                env.push((name.to_string(), "localhost,127.0.0.1,::1".to_string()));
            }
        }
        env
    }

    /// Resolves a directory for commands, failing clearly when it does not exist.
    pub fn resolve_cwd(&self, cwd: Option<&str>) -> Result<Resolved> {
        let resolved = files::resolve(cwd.unwrap_or(WORKSPACE))?;
        files::require_dir(&self.home, &resolved)?;
        Ok(resolved)
    }
}
