//! Starting the session's agent and handing it the run's task: OpenCode serving inside the
//! sandbox with private state folders, a password, the model through the credential proxy and
//! a token scoped to the run; then the prompt, sent once even across restarts.

use super::driver::{argv, Driver};
use super::git;
use super::opencode::{self, Agent};
use super::store::{self, Current, SandboxBirth};
use crate::config;
use crate::error::{Error, Result};
use crate::ids;
use crate::runs::RunRecord;
use crate::sandbox::api::{Exec, Info, Kill, Logs, Spawn, WriteFile};
use crate::time::now_ms;
use crate::tokens::Service;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::StartProcess;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use worker::{Delay, Env};

/// Where OpenCode keeps its own state, inside the workspace so snapshots carry it.
const AGENT_STATE: &str = "/home/sandbox/.handoff/opencode";
/// How long a started OpenCode may take to answer its health check.
const AGENT_START_MS: i64 = 60_000;

/// How an agent is set up beyond the defaults of a coding run: a worker's agent gets only its
/// allowed tools, a step limit, and the worker's secrets and variables in its environment.
#[derive(Default)]
pub(super) struct AgentSetup {
    /// The tools the agent may use; `None`: every tool (a coding run).
    pub tools: Option<Vec<String>>,
    /// The most agent steps (tool-call rounds) before it must answer.
    pub max_steps: Option<u64>,
    pub env: BTreeMap<String, String>,
}

impl Driver<'_> {
    pub(super) async fn start_agent(
        &self,
        current: &mut Current,
        run: &RunRecord,
        setup: &AgentSetup,
    ) -> Result<()> {
        let sandbox = self.sandbox()?;
        if let Some(old) = current.agent_process.take() {
            let _ = sandbox.call(Kill { id: old }).await;
        }
        let dirs: Vec<String> = ["home", "config", "data", "cache", "state"]
            .iter()
            .map(|d| format!("{AGENT_STATE}/{d}"))
            .collect();
        let mut mkdir = vec!["mkdir", "-p"];
        mkdir.extend(dirs.iter().map(String::as_str));
        let git_config = format!("{}/git", dirs[1]);
        mkdir.push(&git_config);
        sandbox
            .call(Exec {
                request: argv(&mkdir, None),
            })
            .await?;
        // The agent's own git reads this as its global excludes: by-products stay out of the
        // commits it makes itself.
        sandbox
            .call(WriteFile {
                path: format!("{git_config}/ignore"),
                base64: B64.encode(git::BY_PRODUCTS),
            })
            .await?;
        let mut meta = store::meta(&self.sql)?;
        let password = match &meta.agent_password {
            Some(p) => p.clone(),
            None => {
                let p = ids::new_id("pw_");
                meta.agent_password = Some(p.clone());
                store::save_meta(&self.sql, &meta)?;
                p
            }
        };
        let (provider, model) = model_of(self.env, run)?;
        let service = match provider.as_str() {
            "anthropic" => Service::Anthropic,
            _ => Service::OpenAi,
        };
        let token = self.token(current, service, None)?;
        let worker = self.worker_url(run)?;
        let provider_config = match service {
            Service::Anthropic => json!({"anthropic": {"options": {
                "baseURL": format!("{worker}/proxy/anthropic/v1"), "apiKey": token}}}),
            _ => {
                json!({"openai": {"npm": "@ai-sdk/openai-compatible", "name": "OpenAI-compatible (via handoff)",
                "options": {"baseURL": format!("{worker}/proxy/openai"), "apiKey": token},
                "models": {model.clone(): {"name": model.clone()}}}})
            }
        };
        let mut config = json!({
            "autoupdate": false,
            "share": "disabled",
            "permission": {"*": "allow", "webfetch": "deny"},
            "model": format!("{provider}/{model}"),
            "small_model": format!("{provider}/{model}"),
            "provider": provider_config,
        });
        restrict(&mut config, setup);
        let env = BTreeMap::from([
            ("HOME".to_string(), dirs[0].clone()),
            ("XDG_CONFIG_HOME".to_string(), dirs[1].clone()),
            ("XDG_DATA_HOME".to_string(), dirs[2].clone()),
            ("XDG_CACHE_HOME".to_string(), dirs[3].clone()),
            ("XDG_STATE_HOME".to_string(), dirs[4].clone()),
            ("OPENCODE_CONFIG_CONTENT".to_string(), config.to_string()),
            ("OPENCODE_DISABLE_MODELS_FETCH".to_string(), "1".to_string()),
            ("OPENCODE_DISABLE_AUTOUPDATE".to_string(), "1".to_string()),
            ("OPENCODE_SERVER_PASSWORD".to_string(), password.clone()),
            (
                "NPM_CONFIG_REGISTRY".to_string(),
                "http://127.0.0.1:9/".to_string(),
            ),
            ("GIT_AUTHOR_NAME".to_string(), "handoff agent".to_string()),
            (
                "GIT_AUTHOR_EMAIL".to_string(),
                "handoff@users.noreply.github.com".to_string(),
            ),
            (
                "GIT_COMMITTER_NAME".to_string(),
                "handoff agent".to_string(),
            ),
            (
                "GIT_COMMITTER_EMAIL".to_string(),
                "handoff@users.noreply.github.com".to_string(),
            ),
        ]);
        let mut env = env;
        env.extend(setup.env.clone());
        let request = StartProcess {
            command: String::new(),
            argv: Some(
                [
                    "opencode",
                    "serve",
                    "--port",
                    &opencode::PORT.to_string(),
                    "--hostname",
                    "127.0.0.1",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ),
            cwd: Some(current.dir.clone()),
            env,
            timeout_ms: None,
        };
        let process = sandbox.call(Spawn { request }).await?;
        current.agent_process = Some(process.id);
        current.sandbox_born = sandbox.call(Info {}).await?.daemon.map(|d| SandboxBirth {
            created_at: d.created_at,
            container: d.isolation.level == "container",
        });
        self.save(current)?;
        let agent = Agent {
            sandbox,
            password,
            dir: current.dir.clone(),
        };
        let deadline = now_ms() + AGENT_START_MS;
        while now_ms() < deadline {
            if agent.healthy().await {
                return Ok(());
            }
            Delay::from(Duration::from_millis(250)).await;
        }
        let logs = agent.sandbox.call(Logs { id: process.id }).await.ok();
        let tail = logs
            .map(|l| opencode::truncate(l.stderr.trim(), 600))
            .unwrap_or_default();
        Err(Error::internal(format!(
            "OpenCode did not start within {} s: {tail}",
            AGENT_START_MS / 1000
        )))
    }

    /// Hands the run's task to the agent (`text`: the worker's instructions instead, with the
    /// tools it may use).
    pub(super) async fn prompt_agent(
        &self,
        current: &mut Current,
        run: &RunRecord,
        text: Option<&str>,
        setup: &AgentSetup,
    ) -> Result<()> {
        let mut meta = store::meta(&self.sql)?;
        let agent = self.agent(current)?;
        let existing = match meta.agent_sessions.get(&current.dir) {
            Some(id) if agent.session_exists(id).await? => Some(id.clone()),
            _ => None,
        };
        let session = match existing {
            Some(id) => id,
            None => {
                let id = agent.create_session(&run.title).await?;
                meta.agent_sessions.insert(current.dir.clone(), id.clone());
                store::save_meta(&self.sql, &meta)?;
                id
            }
        };
        current.agent_session = Some(session.clone());
        self.save(current)?;
        // A restart between sending and recording must not send the task twice.
        let already =
            opencode::read_turn(&agent.messages(&session, Some(10)).await?, &current.marker)
                .prompted;
        if !already {
            let (provider, model) = model_of(self.env, run)?;
            let text = match text {
                Some(t) => format!("{t}\n\n---\n{}", current.marker),
                None => prompt_text(run, current),
            };
            let tools = setup.tools.as_deref().map(tool_switches);
            agent
                .prompt(&session, &text, &provider, &model, tools.as_ref())
                .await?;
        }
        Ok(())
    }
}

/// OpenCode's tool permissions (as of 1.18: `write` and `patch` go by `edit`), and the tools a
/// headless worker never gets (asking a question, sub-agents, loading skills).
const OPENCODE_TOOLS: &[&str] = &[
    "bash",
    "read",
    "edit",
    "write",
    "patch",
    "glob",
    "grep",
    "list",
    "webfetch",
    "websearch",
    "codesearch",
    "todowrite",
    "todoread",
    "task",
    "question",
    "skill",
    "lsp",
];

/// Which of OpenCode's tools a worker's agent may use (name → allowed), from the manifest's
/// list: allowing any of write, edit and patch allows all three.
fn tool_switches(allowed: &[String]) -> serde_json::Value {
    let allows = |tool: &str| match tool {
        "task" | "question" | "skill" => false,
        "edit" | "write" | "patch" => ["edit", "write", "patch"]
            .iter()
            .any(|t| allowed.iter().any(|a| a == t)),
        other => allowed.iter().any(|a| a == other),
    };
    let mut map = serde_json::Map::new();
    for tool in OPENCODE_TOOLS {
        map.insert(tool.to_string(), json!(allows(tool)));
    }
    serde_json::Value::Object(map)
}

/// Limits a worker's agent to its tools (the others switched off in every prompt, and denied
/// in the configuration too) and steps; a refused call is reported to the agent, which goes on.
fn restrict(config: &mut serde_json::Value, setup: &AgentSetup) {
    if let Some(allowed) = &setup.tools {
        if let serde_json::Value::Object(switches) = tool_switches(allowed) {
            for (tool, on) in switches {
                let action = if on.as_bool() == Some(true) {
                    "allow"
                } else {
                    "deny"
                };
                config["permission"][&tool] = json!(action);
            }
        }
        config["experimental"] = json!({"continue_loop_on_deny": true});
    }
    if let Some(steps) = setup.max_steps {
        config["agent"] = json!({"build": {"steps": steps}});
    }
}

/// The text sent to the agent: the task, then how handoff works with it.
fn prompt_text(run: &RunRecord, current: &Current) -> String {
    format!(
        "{}\n\n---\n{} You are working in {}. Do the task completely: make the changes and run the relevant \
         tests. You may commit, but do not push: handoff pushes a branch and opens the pull request. When \
         you are done, reply with a short summary of what you changed and why.",
        run.task, current.marker, current.dir
    )
}

/// `(provider, model)` of a run (its own or the deployment's default).
pub(super) fn model_of(env: &Env, run: &RunRecord) -> Result<(String, String)> {
    let model = run
        .model
        .clone()
        .unwrap_or_else(|| config::default_model(env));
    let (provider, name) = model
        .split_once('/')
        .ok_or_else(|| Error::invalid(format!("model {model:?} is not provider/model")))?;
    match provider {
        "anthropic" | "openai" => Ok((provider.to_string(), name.to_string())),
        other => Err(Error::invalid(format!(
            "provider {other:?} is not available; use anthropic/<model> or openai/<model>"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_agent_gets_only_its_tools_and_never_questions_or_sub_agents() {
        let switches = tool_switches(&["read".to_string(), "write".to_string()]);
        assert_eq!(switches["read"], json!(true));
        assert_eq!(switches["edit"], json!(true), "write goes by edit");
        assert_eq!(switches["bash"], json!(false));
        assert_eq!(switches["webfetch"], json!(false));
        assert_eq!(switches["task"], json!(false));
        assert_eq!(switches["question"], json!(false));
        let mut config = json!({"permission": {"*": "allow"}});
        let setup = AgentSetup {
            tools: Some(vec!["bash".into()]),
            max_steps: Some(7),
            env: BTreeMap::new(),
        };
        restrict(&mut config, &setup);
        assert_eq!(config["permission"]["bash"], json!("allow"));
        assert_eq!(config["permission"]["edit"], json!("deny"));
        assert_eq!(config["agent"]["build"]["steps"], json!(7));
    }
}
