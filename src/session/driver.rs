//! Driving one run through its phases: prepare the session's sandbox → clone → start OpenCode →
//! prompt → follow the agent → transcript, commit, push, pull request. Every step persists the
//! run's state before returning, so an alarm after a restart continues from the same place.

use super::finish::{self, Failure};
use super::git::{self, Remote};
use super::opencode::{self, Activity, Agent};
use super::store::{self, Checkout, Current, Phase};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ids;
use crate::ledger::Ledger;
use crate::links;
use crate::proxy::tokens::{self, Service};
use crate::runs::{error_codes, ProgressDetail, RunError, RunOutcome, RunRecord, RunStatus};
use crate::sandbox::{SandboxClient, SandboxOp};
use crate::time::now_ms;
use handoff_wire::{ExecRequest, GitClone, SandboxSpec, StartProcess, WORKSPACE};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use worker::{Delay, Env, SqlStorage};

/// What the session should do after a step.
pub enum Next {
    /// Take the next step at once.
    Now,
    /// Wake up again after this many milliseconds.
    After(i64),
    /// Nothing left to do.
    Idle,
}

/// The name inside a sandbox under which the egress proxy reaches a Worker on a private address.
const WORKER_ALIAS: &str = "handoff-worker.internal";
/// Where OpenCode keeps its own state, inside the workspace so snapshots carry it.
const AGENT_STATE: &str = "/home/sandbox/.handoff/opencode";
/// Consecutive failures to reach the sandbox before the run is given up.
const MAX_FAILURES: u32 = 5;
/// How long a started OpenCode may take to answer its health check.
const AGENT_START_MS: i64 = 60_000;
/// How long the agent may stay idle without answering the prompt.
const FIRST_ANSWER_MS: i64 = 120_000;
/// How long the agent may stay idle with an answer that never completed before the turn is
/// taken as over.
const UNSETTLED_GRACE_MS: i64 = 30_000;

pub struct Driver<'a> {
    pub env: &'a Env,
    pub sql: SqlStorage,
    pub session_id: String,
}

/// The sandbox a work session owns: `sbx_` and the session id's random part.
pub fn sandbox_id(session_id: &str) -> String {
    format!(
        "{}{}",
        ids::SANDBOX,
        session_id.trim_start_matches(ids::SESSION)
    )
}

impl Driver<'_> {
    fn sandbox(&self) -> Result<SandboxClient> {
        SandboxClient::get(self.env, &sandbox_id(&self.session_id))
    }

    /// One step of the session's work.
    pub async fn step(&self) -> Result<Next> {
        let Some(current) = store::current(&self.sql)? else {
            return match store::next_pending(&self.sql)? {
                Some(run_id) => self.begin(&run_id).await,
                None => Ok(Next::Idle),
            };
        };
        let ledger = Ledger::get(self.env)?;
        let run = ledger.get_run(&current.run_id).await?;
        if run.status.is_terminal() {
            // Cancelled or timed out elsewhere: stop the agent and move on.
            self.stop_agent(&current).await;
            store::clear_current(&self.sql)?;
            return Ok(Next::Now);
        }
        let phase = current.phase;
        match self.advance(current.clone(), &run).await {
            Ok(next) => Ok(next),
            Err(e) if e.kind == ErrorKind::Unavailable && current.failures + 1 < MAX_FAILURES => {
                let mut retry = current;
                retry.failures += 1;
                self.save(&retry)?;
                Ok(Next::After(config::poll_interval_ms(self.env)))
            }
            Err(e) => {
                let code = match (e.kind, phase) {
                    (ErrorKind::Unavailable, Phase::Working) => "sandbox_lost",
                    (ErrorKind::Unavailable | ErrorKind::NotConfigured, _) => {
                        error_codes::SANDBOX_UNAVAILABLE
                    }
                    (_, Phase::Cloning) => "clone_failed",
                    (_, Phase::StartingAgent | Phase::Prompting) => "agent_failed",
                    _ => "run_failed",
                };
                let message = format!("failed while {}: {}", phase_words(phase), e.message);
                self.fail(&current, code, message).await?;
                Ok(Next::Now)
            }
        }
    }

    async fn begin(&self, run_id: &str) -> Result<Next> {
        let ledger = Ledger::get(self.env)?;
        let started = ledger
            .transition(run_id, RunStatus::Starting, None, None)
            .await?;
        store::remove_pending(&self.sql, run_id)?;
        if !started.applied {
            return Ok(Next::Now);
        }
        let now = now_ms();
        let current = Current {
            run_id: run_id.to_string(),
            phase: Phase::Preparing,
            started_at: now,
            deadline: now + config::max_run_ms(self.env),
            dir: WORKSPACE.to_string(),
            checkout: None,
            agent_process: None,
            agent_session: None,
            marker: format!("[handoff:{run_id}]"),
            prompted_at: None,
            failures: 0,
            detail: ProgressDetail::default(),
            idle_unsettled_since: None,
        };
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// Saves the run's state unless it was cleared meanwhile (a cancel arrived while awaiting).
    fn save(&self, current: &Current) -> Result<()> {
        match store::current(&self.sql)? {
            Some(stored) if stored.run_id == current.run_id => {
                store::save_current(&self.sql, current)
            }
            None if current.phase == Phase::Preparing => store::save_current(&self.sql, current),
            _ => Ok(()),
        }
    }

    async fn progress(&self, current: &Current, message: &str) -> Result<()> {
        let ledger = Ledger::get(self.env)?;
        let reply = ledger
            .progress(
                &current.run_id,
                current.phase.name(),
                message,
                Some(current.detail.clone()),
            )
            .await?;
        if !reply.applied {
            return Err(Error::conflict("the run ended"));
        }
        Ok(())
    }

    async fn advance(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        current.failures = 0;
        match current.phase {
            Phase::Preparing => {
                self.progress(&current, "preparing the sandbox").await?;
                let spec = self.sandbox_spec(run)?;
                self.sandbox()?
                    .ensure(SandboxOp::Ensure {
                        id: sandbox_id(&self.session_id),
                        name: format!("session {}", self.session_id),
                        created_by: run.created_by.clone(),
                        spec,
                        idle_timeout_s: 900,
                    })
                    .await?;
                current.phase = if run.repository.is_some() {
                    Phase::Cloning
                } else {
                    Phase::StartingAgent
                };
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Cloning => {
                let checkout = self.clone_repository(&current, run).await?;
                current.dir = checkout.dir.clone();
                current.checkout = Some(checkout);
                current.phase = Phase::StartingAgent;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::StartingAgent => {
                self.progress(&current, "starting OpenCode").await?;
                self.start_agent(&mut current, run).await?;
                current.phase = Phase::Prompting;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Prompting => {
                self.prompt_agent(&mut current, run).await?;
                Ledger::get(self.env)?
                    .transition(&current.run_id, RunStatus::Running, None, None)
                    .await?;
                current.phase = Phase::Working;
                current.prompted_at = Some(now_ms());
                self.save(&current)?;
                self.progress(&current, "the agent is working").await?;
                Ok(Next::After(config::poll_interval_ms(self.env)))
            }
            Phase::Working => self.follow(current).await,
            Phase::Finishing => self.finish(current, run).await,
        }
    }

    /// The session sandbox's spec: default egress, plus a name for the Worker when it listens
    /// on a private address (local development), so the sandbox can reach the proxy.
    fn sandbox_spec(&self, run: &RunRecord) -> Result<SandboxSpec> {
        let mut spec = SandboxSpec::default();
        if let Some(target) = private_origin(run.origin.as_deref()) {
            spec.hosts.insert(WORKER_ALIAS.to_string(), target);
        }
        Ok(spec)
    }

    /// The Worker's base URL as seen from inside the sandbox.
    fn worker_url(&self, run: &RunRecord) -> Result<String> {
        let origin = config::public_url(self.env)
            .or_else(|| run.origin.clone())
            .ok_or_else(|| Error::internal("the run has no origin to reach the proxy through"))?;
        Ok(match private_origin(Some(&origin)) {
            Some(_) => format!("http://{WORKER_ALIAS}"),
            None => origin,
        })
    }

    async fn clone_repository(&self, current: &Current, run: &RunRecord) -> Result<Checkout> {
        let repository = run.repository.as_deref().unwrap_or_default();
        let (owner, name) =
            crate::tools::split_repository(repository, &config::forge_git_url(self.env))?;
        self.progress(current, &format!("cloning {owner}/{name}"))
            .await?;
        let sandbox = self.sandbox()?;
        let dir = format!("{WORKSPACE}/{name}");
        let git_token = self.token(current, Service::Git, Some(&format!("{owner}/{name}")))?;
        let remote = Remote::new(&self.worker_url(run)?, &owner, &name, &git_token);
        let exists = sandbox
            .exec(argv(&["test", "-d", &format!("{dir}/.git")], None))
            .await?
            .exit_code
            == Some(0);
        if !exists {
            let result = sandbox
                .git_clone(GitClone {
                    url: remote.url.clone(),
                    branch: run.branch.clone(),
                    depth: None,
                    dir: Some(dir.clone()),
                    credentials: vec![remote.credential.clone()],
                    timeout_ms: 10 * 60 * 1000,
                })
                .await?;
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
        let base_branch = git::run(&sandbox, &dir, &["rev-parse", "--abbrev-ref", "HEAD"], None)
            .await?
            .stdout
            .trim()
            .to_string();
        let base_commit = git::run(&sandbox, &dir, &["rev-parse", "HEAD"], None)
            .await?
            .stdout
            .trim()
            .to_string();
        Ok(Checkout {
            owner,
            name,
            dir,
            base_branch,
            base_commit,
        })
    }

    fn token(&self, current: &Current, service: Service, repo: Option<&str>) -> Result<String> {
        tokens::mint(
            self.env,
            service,
            &current.run_id,
            repo,
            current.deadline / 1000,
        )
    }

    async fn start_agent(&self, current: &mut Current, run: &RunRecord) -> Result<()> {
        let sandbox = self.sandbox()?;
        if let Some(old) = current.agent_process.take() {
            let _ = sandbox.kill_process(old).await;
        }
        let dirs: Vec<String> = ["home", "config", "data", "cache", "state"]
            .iter()
            .map(|d| format!("{AGENT_STATE}/{d}"))
            .collect();
        let mut mkdir = vec!["mkdir", "-p"];
        mkdir.extend(dirs.iter().map(String::as_str));
        sandbox.exec(argv(&mkdir, None)).await?;
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
        let config = json!({
            "autoupdate": false,
            "share": "disabled",
            "permission": {"*": "allow", "webfetch": "deny"},
            "model": format!("{provider}/{model}"),
            "small_model": format!("{provider}/{model}"),
            "provider": provider_config,
        });
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
        let process = sandbox
            .start_process(StartProcess {
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
            })
            .await?;
        current.agent_process = Some(process.id);
        self.save(current)?;
        let agent = Agent {
            sandbox: &sandbox,
            password: &password,
            dir: &current.dir,
        };
        let deadline = now_ms() + AGENT_START_MS;
        while now_ms() < deadline {
            if agent.healthy().await {
                return Ok(());
            }
            Delay::from(Duration::from_millis(250)).await;
        }
        let logs = sandbox.process_logs(process.id).await.ok();
        let tail = logs
            .map(|l| opencode::truncate(l.stderr.trim(), 600))
            .unwrap_or_default();
        Err(Error::internal(format!(
            "OpenCode did not start within {} s: {tail}",
            AGENT_START_MS / 1000
        )))
    }

    async fn prompt_agent(&self, current: &mut Current, run: &RunRecord) -> Result<()> {
        let sandbox = self.sandbox()?;
        let mut meta = store::meta(&self.sql)?;
        let password = meta.agent_password.clone().unwrap_or_default();
        let agent = Agent {
            sandbox: &sandbox,
            password: &password,
            dir: &current.dir,
        };
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
            agent
                .prompt(&session, &prompt_text(run, current), &provider, &model)
                .await?;
        }
        Ok(())
    }

    /// One look at the working agent.
    async fn follow(&self, mut current: Current) -> Result<Next> {
        let sandbox = self.sandbox()?;
        let password = store::meta(&self.sql)?.agent_password.unwrap_or_default();
        let session = current.agent_session.clone().unwrap_or_default();
        let agent = Agent {
            sandbox: &sandbox,
            password: &password,
            dir: &current.dir,
        };
        if now_ms() > current.deadline {
            let _ = agent.abort(&session).await;
            let message = format!(
                "the run took longer than {} (RUN_MAX_DURATION_SECONDS) and was stopped",
                human(config::max_run_ms(self.env) / 1000)
            );
            self.fail(&current, error_codes::TIMED_OUT, message).await?;
            return Ok(Next::Now);
        }
        // Messages first, then the status: a turn read as settled and a session idle after it
        // is really over, whereas the other order races a step that starts in between.
        let turn = opencode::read_turn(
            &agent
                .messages(&session, Some(60))
                .await
                .map_err(agent_gone)?,
            &current.marker,
        );
        let activity = agent.activity(&session).await.map_err(agent_gone)?;
        if turn.prompted {
            current.detail = turn.detail.clone();
        }
        let message = match &activity {
            Activity::Retry { attempt, message } => {
                format!("the model call failed, retrying (attempt {attempt}): {message}")
            }
            _ => match current.detail.recent.last() {
                Some(step) => format!(
                    "step {}: {} {}",
                    current.detail.steps, step.tool, step.title
                ),
                None => "thinking".to_string(),
            },
        };
        self.save(&current)?;
        self.progress(&current, &message).await?;
        let idle = activity == Activity::Idle;
        let now = now_ms();
        let waited = now - current.prompted_at.unwrap_or(current.started_at);
        // An answer that stays unfinished while the agent is idle (it died mid-step) ends the
        // turn after a grace period rather than at the stall watchdog.
        let unsettled_for = match (
            idle && turn.answered && !turn.settled,
            current.idle_unsettled_since,
        ) {
            (true, Some(since)) => now - since,
            (true, None) => {
                current.idle_unsettled_since = Some(now);
                0
            }
            (false, _) => {
                current.idle_unsettled_since = None;
                0
            }
        };
        if idle && (turn.settled || turn.error.is_some() || unsettled_for > UNSETTLED_GRACE_MS) {
            current.phase = Phase::Finishing;
            self.save(&current)?;
            return Ok(Next::Now);
        }
        self.save(&current)?;
        if idle && !turn.answered && waited > FIRST_ANSWER_MS {
            return Err(Error::internal(
                "the agent went idle without answering the task".to_string(),
            ));
        }
        Ok(Next::After(config::poll_interval_ms(self.env)))
    }

    async fn finish(&self, current: Current, run: &RunRecord) -> Result<Next> {
        let sandbox = self.sandbox()?;
        let password = store::meta(&self.sql)?.agent_password.unwrap_or_default();
        let session = current.agent_session.clone().unwrap_or_default();
        let agent = Agent {
            sandbox: &sandbox,
            password: &password,
            dir: &current.dir,
        };
        let messages = agent.messages(&session, None).await?;
        let turn = opencode::read_turn(&messages, &current.marker);
        let transcript = match agent.transcript(&session).await {
            Ok(text) => self.store_transcript(&current.run_id, text).await.is_ok(),
            Err(_) => false,
        };
        self.stop_agent(&current).await;
        if let Some(error) = turn.error {
            let message = format!("the agent's model call failed: {error}");
            self.fail(&current, "agent_failed", message).await?;
            return Ok(Next::Now);
        }
        let summary = turn
            .last_text
            .map(|t| opencode::truncate(t.trim(), 8000))
            .unwrap_or_else(|| "(the agent ended without a summary)".to_string());
        let mut outcome = RunOutcome {
            summary: Some(summary.clone()),
            tokens: Some(turn.detail.tokens.clone()),
            cost_usd: Some(turn.detail.cost_usd),
            transcript,
            ..RunOutcome::default()
        };
        if let Some(checkout) = &current.checkout {
            Ledger::get(self.env)?
                .progress(
                    &current.run_id,
                    "pushing",
                    "committing and pushing the changes",
                    Some(turn.detail.clone()),
                )
                .await?;
            let git_token = self.token(
                &current,
                Service::Git,
                Some(&format!("{}/{}", checkout.owner, checkout.name)),
            )?;
            let remote = Remote::new(
                &self.worker_url(run)?,
                &checkout.owner,
                &checkout.name,
                &git_token,
            );
            // Anyone who can read the pull request can read this link: it needs the owner's
            // sign-in, never a bearer token.
            let page = links::run_page_plain_url(&self.worker_public_url(run), &run.id);
            let pushed = match finish::push(
                &sandbox, checkout, &run.id, &run.title, &summary, &remote,
            )
            .await
            {
                Ok(pushed) => pushed,
                Err(Failure { phase, error }) => {
                    let message = format!("failed while {phase}: {}", error.message);
                    self.fail(&current, "push_failed", message).await?;
                    return Ok(Next::Now);
                }
            };
            if let Some(pushed) = pushed {
                Ledger::get(self.env)?
                    .progress(
                        &current.run_id,
                        "opening_pr",
                        &format!("opening a pull request from {}", pushed.branch),
                        None,
                    )
                    .await?;
                match finish::open_pull_request(
                    self.env,
                    checkout,
                    &pushed.branch,
                    &run.title,
                    &summary,
                    &run.id,
                    &page,
                )
                .await
                {
                    Ok(url) => outcome.pull_request_url = Some(url),
                    Err(error) => {
                        let message =
                            format!("failed while opening the pull request: {}", error.message);
                        self.fail(&current, "pr_failed", message).await?;
                        return Ok(Next::Now);
                    }
                }
                outcome.branch = Some(pushed.branch);
                outcome.commits = pushed.commits;
                outcome.changed_files = pushed.changed_files;
                outcome.diffstat = pushed.diffstat;
            }
        }
        Ledger::get(self.env)?
            .transition(&current.run_id, RunStatus::Completed, None, Some(outcome))
            .await?;
        store::clear_current(&self.sql)?;
        Ok(Next::Now)
    }

    /// The origin links in pull requests should use (the public one, never the sandbox alias).
    fn worker_public_url(&self, run: &RunRecord) -> String {
        config::public_url(self.env)
            .or_else(|| run.origin.clone())
            .unwrap_or_default()
    }

    async fn store_transcript(&self, run_id: &str, text: String) -> Result<()> {
        let bucket = self.env.bucket("ARTIFACTS")?;
        bucket
            .put(transcript_key(run_id), worker::Data::Text(text))
            .execute()
            .await?;
        Ok(())
    }

    /// Ends the run as failed (stopping its agent); terminal states stay as they are.
    async fn fail(&self, current: &Current, code: &str, message: String) -> Result<()> {
        self.stop_agent(current).await;
        let error = RunError {
            code: code.to_string(),
            message,
        };
        Ledger::get(self.env)?
            .transition(&current.run_id, RunStatus::Failed, Some(error), None)
            .await?;
        store::clear_current(&self.sql)?;
        Ok(())
    }

    /// Aborts the agent's turn and stops OpenCode (best effort).
    pub async fn stop_agent(&self, current: &Current) {
        let Ok(sandbox) = self.sandbox() else {
            return;
        };
        if let Some(session) = &current.agent_session {
            let password = store::meta(&self.sql)
                .ok()
                .and_then(|m| m.agent_password)
                .unwrap_or_default();
            let agent = Agent {
                sandbox: &sandbox,
                password: &password,
                dir: &current.dir,
            };
            let _ = agent.abort(session).await;
        }
        if let Some(process) = current.agent_process {
            let _ = sandbox.kill_process(process).await;
        }
    }
}

/// R2 key of a run's transcript.
pub fn transcript_key(run_id: &str) -> String {
    format!("runs/{run_id}/transcript.json")
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
fn model_of(env: &Env, run: &RunRecord) -> Result<(String, String)> {
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

/// `host:port` of an origin on a loopback or private address, which a sandbox can only reach
/// through a configured name.
fn private_origin(origin: Option<&str>) -> Option<String> {
    let origin = origin?;
    let (scheme, rest) = origin.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let private = host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_private());
    if !private {
        return None;
    }
    let port = authority
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| {
            if scheme == "https" {
                "443".into()
            } else {
                "80".into()
            }
        });
    Some(format!("{host}:{port}"))
}

fn argv(args: &[&str], cwd: Option<&str>) -> ExecRequest {
    ExecRequest {
        command: String::new(),
        argv: Some(args.iter().map(|s| s.to_string()).collect()),
        cwd: cwd.map(str::to_string),
        env: BTreeMap::new(),
        timeout_ms: 60_000,
        credentials: Vec::new(),
    }
}

/// An unreachable agent inside a reachable sandbox means OpenCode stopped.
fn agent_gone(e: Error) -> Error {
    if e.kind == ErrorKind::InvalidInput && e.message.contains("nothing is listening") {
        Error::internal("the agent (OpenCode) stopped unexpectedly".to_string())
    } else {
        e
    }
}

fn phase_words(phase: Phase) -> &'static str {
    match phase {
        Phase::Preparing => "preparing the sandbox",
        Phase::Cloning => "cloning the repository",
        Phase::StartingAgent => "starting the agent",
        Phase::Prompting => "handing the task to the agent",
        Phase::Working => "the agent was working",
        Phase::Finishing => "finishing",
    }
}

fn human(secs: i64) -> String {
    if secs >= 3600 {
        format!("{} h", secs / 3600)
    } else if secs >= 60 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
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
        assert_eq!(private_origin(None), None);
    }

    #[test]
    fn session_sandboxes_share_the_session_id() {
        assert_eq!(sandbox_id("ses_abc"), "sbx_abc");
    }
}
