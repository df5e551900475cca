//! The approval gate. After a clean first pass, a worker that needs approval stops: its
//! proposal (`proposal.md` or `proposal.json`, else the end of its output; redacted) goes to
//! the ledger and the run waits in `pending_approval` — the sandbox may sleep to R2 meanwhile.
//! Only the ledger records the decision (from `workers_approve` / `workers_reject` or the run
//! page), so nothing the worker writes can approve it. Approved, the second pass runs with the
//! worker's full egress and `approval.json` (written by handoff); rejected or lapsed, the run
//! ends cancelled and the sandbox is removed without a second pass.

use super::collect::Ended;
use super::DIR;
use crate::config::workers as settings;
use crate::error::{ErrorKind, Result};
use crate::ledger::api::{AwaitApproval, Decide};
use crate::runs::{RunRecord, RunStatus};
use crate::sandbox::api::{ReadFile, WriteFile};
use crate::session::driver::{Driver, Next};
use crate::session::store::{Current, Phase};
use crate::time::{now_ms, rfc3339};
use crate::workers::redact::Redactor;
use crate::workers::{Approval, Decision, Manifest, Runtime, WorkerRunSpec};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::Encoding;
use serde_json::json;

/// Longest proposal kept.
const PROPOSAL_MAX: usize = 16 * 1024;
/// How often a waiting run looks at its approval on its own: the decision wakes it at once, so
/// this only bounds the wait when that wake-up was lost.
const LOOK_MS: i64 = 10 * 60 * 1000;

impl Driver<'_> {
    pub(super) async fn request_approval(
        &self,
        mut current: Current,
        run: &RunRecord,
        manifest: &Manifest,
        redactor: &Redactor,
        ended: &Ended,
    ) -> Result<Next> {
        let mut proposal = None;
        for name in ["proposal.md", "proposal.json"] {
            let read = self
                .sandbox()?
                .call(ReadFile {
                    path: format!("{DIR}/{name}"),
                    encoding: Encoding::Text,
                    max: None,
                })
                .await;
            match read {
                Ok(file) => {
                    proposal = Some(file.content);
                    break;
                }
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let proposal = proposal.unwrap_or_else(|| super::script::live_text(&ended.stdout, ""));
        let proposal = crate::session::opencode::truncate(&redactor.text(&proposal), PROPOSAL_MAX);
        let now = now_ms();
        let expires_at = now + settings::approval_ttl_ms(self.env);
        let approval = Approval {
            label: manifest.approvals.label.clone(),
            decision: Decision::Pending,
            proposal,
            requested_at: now,
            expires_at,
            decided_by: None,
            decided_at: None,
            reason: None,
        };
        let mut state = current.worker.clone().unwrap_or_default();
        state.earlier_ms = ended.duration_ms;
        state.process = None;
        state.attempts = 0;
        state.started_at = None;
        state.deadline = None;
        current.worker = Some(state);
        current.phase = Phase::AwaitingApproval;
        // The ledger first: a restart before the save repeats this step, and the ledger takes
        // only the first request (a run already waiting is not moved).
        self.ledger()?
            .call(AwaitApproval {
                run_id: run.id.clone(),
                approval,
            })
            .await?;
        self.save(&current)?;
        Ok(Next::After(LOOK_MS.min(expires_at - now).max(0)))
    }

    pub(super) async fn at_gate(
        &self,
        mut current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        let approval = run.worker.as_ref().and_then(|w| w.approval.clone());
        let now = now_ms();
        match (run.status, approval) {
            (RunStatus::PendingApproval, Some(a)) if now >= a.expires_at => {
                self.ledger()?
                    .call(Decide {
                        run_id: run.id.clone(),
                        decision: Decision::Expired,
                        principal: "handoff".into(),
                        reason: Some(format!("no decision by {}", rfc3339(a.expires_at))),
                    })
                    .await?;
                Ok(Next::Now)
            }
            (RunStatus::PendingApproval, Some(a)) => {
                Ok(Next::After(LOOK_MS.min(a.expires_at - now)))
            }
            (RunStatus::Running, Some(a)) if a.decision == Decision::Approved => {
                let version = self.worker_version(spec, false).await?;
                let manifest = &version.manifest;
                self.progress(&current, "approved: carrying it out").await?;
                self.ensure_worker_sandbox(run, manifest, true).await?;
                let stamp = json!({
                    "runId": run.id,
                    "decision": "approved",
                    "decidedBy": a.decided_by,
                    "decidedAt": a.decided_at.map(rfc3339),
                    "label": a.label,
                    "proposalSha256": crate::mac::sha256_hex(a.proposal.as_bytes()),
                });
                self.sandbox()?
                    .call(WriteFile {
                        path: format!("{DIR}/approval.json"),
                        base64: B64.encode(serde_json::to_vec_pretty(&stamp)?),
                    })
                    .await?;
                let mut state = current.worker.clone().unwrap_or_default();
                state.apply = true;
                current.worker = Some(state);
                // An agent starts afresh (its sandbox may have slept): its conversation is kept
                // in the workspace, so it goes on where it stopped.
                current.phase = match manifest.runtime {
                    Runtime::Skill => Phase::StartingAgent,
                    _ => Phase::Executing,
                };
                self.save(&current)?;
                Ok(Next::Now)
            }
            // Anything else is a run the ledger ended (the next step sees it and cleans up).
            _ => Ok(Next::After(LOOK_MS)),
        }
    }
}
