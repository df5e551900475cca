//! A skill worker's agent: OpenCode started with only the worker's allowed tools, its step
//! limit, and its secrets and variables; the skill handed over as the task (for a worker that
//! needs approval, first as "propose, do not act", then, once approved, "carry it out"); its
//! answer and every tool call read back for the run's outcome.

use super::collect::Ended;
use super::DIR;
use crate::error::{Error, Result};
use crate::runs::{RunErrorCode, RunRecord, RunStatus};
use crate::session::driver::{Driver, Next};
use crate::session::launch::AgentSetup;
use crate::session::opencode::truncate;
use crate::session::store::{Current, Phase};
use crate::session::turn;
use crate::time::now_ms;
use crate::workers::redact::Redactor;
use crate::workers::{Manifest, ToolCall, VersionRecord, WorkerRunSpec};

/// Most tool calls a run keeps.
const MAX_TOOL_CALLS: usize = 500;

impl Driver<'_> {
    pub(super) async fn advance_worker_agent(
        &self,
        mut current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        match current.phase {
            Phase::StartingAgent => {
                self.progress(&current, "starting the agent").await?;
                let version = self.worker_version(spec, false).await?;
                let manifest = &version.manifest;
                let Some(secrets) = self.worker_secrets(&current, manifest).await? else {
                    return Ok(Next::Now);
                };
                let mut state = current.worker.clone().unwrap_or_default();
                let mut env = secrets;
                env.extend(super::script::handoff_env(run, spec, manifest, &state));
                let setup = AgentSetup {
                    tools: Some(manifest.tools.clone()),
                    max_steps: Some(manifest.limits.max_tool_iterations),
                    env,
                };
                current.dir = DIR.to_string();
                let now = now_ms();
                state.started_at = Some(now);
                state.max_steps = Some(manifest.limits.max_tool_iterations);
                state.max_tokens = Some(manifest.limits.max_tokens);
                current.worker = Some(state);
                current.deadline = now + (manifest.limits.timeout_seconds * 1000) as i64;
                self.start_agent(&mut current, run, &setup).await?;
                current.phase = Phase::Prompting;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Prompting => {
                let version = self.worker_version(spec, true).await?;
                let apply = current.worker.as_ref().is_some_and(|w| w.apply);
                if apply {
                    current.marker = format!("{}{}:approved]", turn::MARKER, run.id);
                    current.deadline =
                        now_ms() + (version.manifest.limits.timeout_seconds * 1000) as i64;
                }
                let text = instructions(&version, spec, apply)?;
                let setup = AgentSetup {
                    tools: Some(version.manifest.tools.clone()),
                    ..AgentSetup::default()
                };
                self.prompt_agent(&mut current, run, Some(&text), &setup)
                    .await?;
                if run.status != RunStatus::Running {
                    self.transition(&run.id, RunStatus::Running, None, None)
                        .await?;
                }
                current.phase = Phase::Working;
                current.prompted_at = Some(now_ms());
                self.save(&current)?;
                self.progress(&current, "the agent is working").await?;
                Ok(Next::After(crate::config::poll_interval_ms(self.env)))
            }
            Phase::Working => self.follow(current, run).await,
            Phase::Finishing => {
                current.phase = Phase::Collecting;
                self.save(&current)?;
                Ok(Next::Now)
            }
            _ => Err(Error::internal("not an agent phase")),
        }
    }

    /// How the agent's pass ended: its answer as output, a failed model call as an error, every
    /// tool call of the run.
    pub(super) async fn agent_ended(
        &self,
        current: &Current,
        redactor: &Redactor,
    ) -> Result<Ended> {
        let agent = self.agent(current)?;
        let session = current.agent_session.clone().unwrap_or_default();
        let reads = &turn::TURN_READS;
        let messages = turn::messages_since(&agent, &session, &current.marker, reads).await?;
        let turn = turn::read_turn(&messages, &current.marker);
        let state = current.worker.clone().unwrap_or_default();
        let started = state.started_at.unwrap_or(current.started_at);
        let answer = turn.last_text.clone().unwrap_or_default();
        let (exit_code, stderr) = match &turn.error {
            Some(error) => (Some(1), format!("the agent's model call failed: {error}")),
            None => (Some(0), String::new()),
        };
        let _ = agent.abort(&session).await;
        Ok(Ended {
            exit_code,
            timed_out: false,
            duration_ms: state.earlier_ms + (now_ms() - started).max(0) as u64,
            stdout: redactor.text(answer.trim()),
            stderr: redactor.text(&stderr),
            truncated: false,
            tool_calls: tool_calls(&messages, redactor),
        })
    }
}

/// Every tool call in the conversation, oldest first (titles redacted).
fn tool_calls(messages: &[serde_json::Value], redactor: &Redactor) -> Vec<ToolCall> {
    messages
        .iter()
        .filter(|m| m["info"]["role"] == "assistant")
        .flat_map(turn::steps_of)
        .take(MAX_TOOL_CALLS)
        .map(|s| ToolCall {
            tool: s.tool,
            title: redactor.text(&s.title),
            status: s.status,
        })
        .collect()
}

/// What the agent is told: the skill, then where its inputs are and where its results go, and
/// — for a worker that needs approval — whether to propose or to carry out.
fn instructions(version: &VersionRecord, spec: &WorkerRunSpec, apply: bool) -> Result<String> {
    let m: &Manifest = &version.manifest;
    if apply {
        // The same conversation goes on: the skill and the proposal are already in it.
        return Ok(format!(
            "The owner approved your proposal (the decision is in {DIR}/approval.json). Now \
             carry it out exactly as proposed: {}. Then reply with a short summary of what you did.",
            m.approvals.label
        ));
    }
    let files = version
        .files
        .as_ref()
        .ok_or_else(|| Error::internal("the version came without its files"))?;
    let skill = files
        .text(&m.entrypoint)
        .ok_or_else(|| Error::internal("the skill is not text"))?;
    let mut text = format!(
        "{}\n\n---\nYou are running as the background worker \"{}\" (v{}, {} run) in {DIR}. \
         Its inputs are in {DIR}/inputs.json: {}",
        skill.trim(),
        m.name,
        spec.version,
        spec.trigger.as_str(),
        truncate(
            &serde_json::Value::Object(spec.inputs.clone()).to_string(),
            4000
        )
    );
    if !spec.files.is_empty() {
        text.push_str(&format!("\nInput files are in {DIR}/inputs/."));
    }
    if spec.webhook_key.is_some() {
        text.push_str(&format!("\nThe webhook payload is in {DIR}/webhook.json."));
    }
    text.push_str(&format!("\nWrite files you produce to {DIR}/outputs/."));
    if let Some(schema) = &m.outputs.result_schema {
        text.push_str(&format!(
            "\nWrite your result as JSON to {DIR}/result.json, matching this JSON Schema: {schema}"
        ));
    }
    if m.approvals.required {
        text.push_str(&format!(
            "\nThis worker needs the owner's approval before it may: {}. Do NOT do that yet and \
             change nothing outside {DIR}. Work out exactly what you would do, write it as a \
             clear proposal to {DIR}/proposal.md, and stop. You will be told when it is approved.",
            m.approvals.label
        ));
    }
    text.push_str("\nWhen you are done, reply with a short summary of what you did.");
    Ok(text)
}

/// Whether the agent went over the worker's token limit (a message saying so), checked while it
/// works.
pub(in crate::session) fn over_limit(current: &Current) -> Option<String> {
    let max = current.worker.as_ref()?.max_tokens?;
    let t = &current.detail.tokens;
    let used = t.input + t.output + t.reasoning;
    (used > max).then(|| {
        format!("the agent used {used} tokens, more than the worker's limit of {max} (limits.max_tokens); it was stopped")
    })
}

/// The code a run over its limit ends with.
pub(in crate::session) const OVER_LIMIT: RunErrorCode = RunErrorCode::LimitExceeded;
