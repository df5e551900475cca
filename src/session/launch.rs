//! Starting the session's agent and handing it the run's task: OpenCode serving inside the
//! sandbox with private state folders, a password, the model through the credential proxy and
//! a token scoped to the run; then the prompt, sent once even across restarts.

use super::driver::{argv, Driver};
use super::git;
use super::keep::{kill_agent, still_running, thaw};
use super::opencode;
use super::policy;
use super::store::{self, Current, KeptAgent, SandboxBirth};
use crate::config;
use crate::error::{Error, Result};
use crate::ids;
use crate::runs::RunRecord;
use crate::sandbox::api::{Exec, Info, Logs, SandboxClient, Spawn, WriteFile};
use crate::time::now_ms;
use crate::tokens::{self, Service};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::{StartProcess, WORKSPACE};
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

/// OpenCode's configuration and environment for one run.
struct Launch {
    env: BTreeMap<String, String>,
    /// Digest of everything but the model token (see [`KeptAgent::setup`]).
    digest: String,
    /// When the model token expires (ms); `None`: run-scoped, so the agent is not kept.
    session_token_expires_at: Option<i64>,
}

impl Driver<'_> {
    /// Starts OpenCode for the run (or keeps the one the session's last coding run left
    /// serving, when it fits) and waits until it answers.
    pub(super) async fn start_agent(
        &self,
        current: &mut Current,
        run: &RunRecord,
        setup: &AgentSetup,
    ) -> Result<()> {
        self.launch_agent(current, run, setup).await?;
        self.await_agent(current).await
    }

    /// Gets OpenCode going without waiting for it to answer: the kept agent when its setup is
    /// this run's and its token outlives the run, otherwise a new one (the old one stopped).
    pub(super) async fn launch_agent(
        &self,
        current: &mut Current,
        run: &RunRecord,
        setup: &AgentSetup,
    ) -> Result<()> {
        let sandbox = self.sandbox()?;
        let launch = self.agent_launch(current, run, setup)?;
        let mut meta = store::meta(&self.sql)?;
        if let Some(kept) = meta.agent.take() {
            let fits = launch.session_token_expires_at.is_some()
                && kept.setup == launch.digest
                && kept.token_expires_at >= current.deadline;
            // Thawing answers whether it still runs; one the sandbox did not thaw is not used.
            let thawed = if fits {
                thaw(&sandbox, &kept).await
            } else {
                None
            };
            if thawed == Some(true) {
                current.agent_process = Some(kept.process);
                current.sandbox_born = kept.born.clone();
                meta.agent = Some(KeptAgent {
                    released_at: None,
                    frozen: false,
                    ..kept
                });
                store::save_meta(&self.sql, &meta)?;
                return self.save(current);
            }
            // A sandbox has one agent: the kept one is stopped before another starts, and
            // when the sandbox cannot say whether it still runs, the step fails (and is tried
            // again) rather than start a second one beside it.
            let alive = match thawed {
                Some(alive) => alive,
                None => still_running(&sandbox, &kept).await?,
            };
            if alive {
                kill_agent(&sandbox, kept.process).await?;
            }
            if current.agent_process == Some(kept.process) {
                current.agent_process = None;
            }
            store::save_meta(&self.sql, &meta)?;
        }
        if let Some(old) = current.agent_process {
            kill_agent(&sandbox, old).await?;
            current.agent_process = None;
        }
        self.prepare_agent_state(&sandbox).await?;
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
            // OpenCode serves whichever directory a request names, so it can start before the
            // clone is there.
            cwd: Some(WORKSPACE.to_string()),
            env: launch.env,
            timeout_ms: None,
            key: Some(current.agent_start_key()),
        };
        self.save(current)?;
        let process = sandbox.call(Spawn { request }).await?;
        current.agent_process = Some(process.id);
        current.agent_start = None;
        // Written down at once: a step that fails from here on (and is tried again) stops this
        // agent before it starts another.
        self.save(current)?;
        current.sandbox_born = sandbox.call(Info {}).await?.daemon.map(|d| SandboxBirth {
            created_at: d.created_at,
            container: d.isolation.level == "container",
        });
        if let Some(token_expires_at) = launch.session_token_expires_at {
            meta.agent = Some(KeptAgent {
                process: process.id,
                started_at: process.started_at,
                setup: launch.digest,
                token_expires_at,
                born: current.sandbox_born.clone(),
                released_at: None,
                frozen: false,
            });
            store::save_meta(&self.sql, &meta)?;
        }
        self.save(current)
    }

    /// Waits until the run's OpenCode answers; one that does not is stopped (and not kept).
    async fn await_agent(&self, current: &Current) -> Result<()> {
        let agent = self.agent(current)?;
        let deadline = now_ms() + AGENT_START_MS;
        let mut unanswered = 0;
        while now_ms() < deadline {
            let within = policy::health_try_ms(unanswered);
            let tried = now_ms();
            if agent.healthy(within as u64).await {
                return Ok(());
            }
            // A try that hung met OpenCode between binding its port and serving (such a
            // request is never answered; it serves a moment later, so the next try goes at
            // once), or one too busy to answer in time: the next waits longer, so a slow
            // OpenCode is still seen. A refused try waits a little before the next.
            if now_ms() - tried >= within {
                unanswered += 1;
            } else {
                Delay::from(Duration::from_millis(100)).await;
            }
        }
        let Some(process) = current.agent_process else {
            return Err(Error::internal("OpenCode was not started"));
        };
        let logs = agent.sandbox.call(Logs { id: process }).await.ok();
        let tail = logs
            .map(|l| opencode::truncate(l.stderr.trim(), 600))
            .unwrap_or_default();
        self.forget_kept_agent(process).await?;
        Err(Error::internal(format!(
            "OpenCode did not start within {} s: {tail}",
            AGENT_START_MS / 1000
        )))
    }

    /// OpenCode's private folders, and the global git excludes its own commits go by.
    async fn prepare_agent_state(&self, sandbox: &SandboxClient) -> Result<()> {
        let dirs = agent_dirs();
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
        Ok(())
    }

    /// The run's OpenCode configuration and environment. A coding run's agent gets a model
    /// token for the session, so it can serve the session's next runs; a worker's agent one
    /// for its run alone.
    fn agent_launch(
        &self,
        current: &Current,
        run: &RunRecord,
        setup: &AgentSetup,
    ) -> Result<Launch> {
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
        let keep = setup.tools.is_none() && setup.max_steps.is_none() && setup.env.is_empty();
        let session_token_expires_at = keep.then(|| {
            current
                .deadline
                .max(now_ms() + 2 * config::max_run_ms(self.env))
        });
        let mut env = agent_env(&password);
        env.extend(setup.env.clone());
        let config = |token: &str| {
            let mut config =
                opencode_config(&self.worker_url(run)?, service, &provider, &model, token);
            restrict(&mut config, setup);
            Ok::<_, Error>(config.to_string())
        };
        let mut described = env.clone();
        described.insert(CONFIG_VAR.to_string(), config("")?);
        let digest = crate::mac::sha256_hex(json!(described).to_string().as_bytes());
        let token = match session_token_expires_at {
            Some(exp) => tokens::mint_for_session(self.env, service, &self.session_id, exp / 1000)?,
            None => self.token(current, service, None)?,
        };
        env.insert(CONFIG_VAR.to_string(), config(&token)?);
        Ok(Launch {
            env,
            digest,
            session_token_expires_at,
        })
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
        let (session, created) = match existing {
            Some(id) => (id, false),
            None => {
                let id = agent.create_session(&run.title).await?;
                meta.agent_sessions.insert(current.dir.clone(), id.clone());
                store::save_meta(&self.sql, &meta)?;
                (id, true)
            }
        };
        current.agent_session = Some(session.clone());
        self.save(current)?;
        let marker = current.marker.clone();
        let text = match text {
            Some(t) => format!("{t}\n\n---\n{marker}"),
            None => prompt_text(run, current),
        };
        let tools = setup.tools.as_deref().map(tool_switches);
        // A session created just now has no messages to look for the task among.
        self.hand_over(
            current,
            run,
            (&session, created),
            (&marker, &text),
            tools.as_ref(),
        )
        .await
    }
}

/// The variable OpenCode reads its configuration from.
const CONFIG_VAR: &str = "OPENCODE_CONFIG_CONTENT";

/// OpenCode's home and XDG folders, in [`AGENT_STATE`].
fn agent_dirs() -> Vec<String> {
    ["home", "config", "data", "cache", "state"]
        .iter()
        .map(|d| format!("{AGENT_STATE}/{d}"))
        .collect()
}

/// OpenCode's environment apart from its configuration.
fn agent_env(password: &str) -> BTreeMap<String, String> {
    let dirs = agent_dirs();
    let pairs = [
        ("HOME", dirs[0].as_str()),
        ("XDG_CONFIG_HOME", &dirs[1]),
        ("XDG_DATA_HOME", &dirs[2]),
        ("XDG_CACHE_HOME", &dirs[3]),
        ("XDG_STATE_HOME", &dirs[4]),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_SERVER_PASSWORD", password),
        ("NPM_CONFIG_REGISTRY", "http://127.0.0.1:9/"),
        ("GIT_AUTHOR_NAME", "handoff agent"),
        ("GIT_AUTHOR_EMAIL", "handoff@users.noreply.github.com"),
        ("GIT_COMMITTER_NAME", "handoff agent"),
        ("GIT_COMMITTER_EMAIL", "handoff@users.noreply.github.com"),
    ];
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// OpenCode's configuration: every tool allowed but web fetches, the model through the
/// credential proxy with `token` as its key, no snapshots of its own.
fn opencode_config(
    worker: &str,
    service: Service,
    provider: &str,
    model: &str,
    token: &str,
) -> serde_json::Value {
    let provider_config = match service {
        Service::Anthropic => json!({"anthropic": {"options": {
            "baseURL": format!("{worker}/proxy/anthropic/v1"), "apiKey": token}}}),
        _ => {
            json!({"openai": {"npm": "@ai-sdk/openai-compatible", "name": "OpenAI-compatible (via handoff)",
            "options": {"baseURL": format!("{worker}/proxy/openai"), "apiKey": token},
            "models": {model: {"name": model}}}})
        }
    };
    json!({
        "autoupdate": false,
        "share": "disabled",
        "permission": {"*": "allow", "webfetch": "deny"},
        "model": format!("{provider}/{model}"),
        "small_model": format!("{provider}/{model}"),
        "provider": provider_config,
        // OpenCode's own file snapshots (a second git store of the workspace, written and
        // diffed at every step) serve its undo, which handoff never uses: git is the record.
        "snapshot": false,
    })
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
