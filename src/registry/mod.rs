//! The worker registry Durable Object, one per deployment: workers, their immutable versions and
//! folders, sealed secrets, and the schedules. Its alarm is set to the earliest fire time of any
//! schedule; when it rings, each due worker gets one run in the ledger (see
//! `workers::schedule` for the missed-fire policy) and its next fire time.

pub mod api;
mod handler;
mod secrets;
mod store;
mod templates;

use crate::error::{Error, Result};
use crate::ledger::api::{CreateRun, Ledger};
use crate::rpc;
use crate::time::{alarm_offset, now_ms};
use crate::workers::{schedule, Trigger};
use api::{PrepareRun, RegistryRequest};
use std::rc::Rc;
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, State};

/// When a fire could not be handed to the ledger, the alarm tries again this soon (the run's
/// idempotency key makes the retry safe).
const RETRY_MS: i64 = 10_000;

/// Cloned for each op it answers over RPC (`rpc::export_rpc!`).
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
#[derive(Clone)]
pub struct WorkerRegistry {
    state: Rc<State>,
    env: Env,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for WorkerRegistry {
    fn new(state: State, env: Env) -> Self {
        let sql = state.storage().sql();
        if let Err(e) =
            store::create_schema(&sql).and_then(|()| store::templates::create_schema(&sql))
        {
            console_error!("registry schema: {e}");
        }
        Self {
            state: Rc::new(state),
            env,
        }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        rpc::fetch_refused()
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let retry = match self.fire_due().await {
            Ok(retry) => retry,
            Err(e) => {
                console_error!("registry alarm: {e}");
                true
            }
        };
        let soon = retry.then(|| now_ms() + RETRY_MS);
        if let Err(e) = self.reschedule(soon).await {
            console_error!("registry alarm: {e}");
            self.state.storage().set_alarm(RETRY_MS).await?;
        }
        Response::ok("")
    }
}

rpc::export_rpc!(WorkerRegistry, |registry, text| {
    rpc::serve_text(text, |request: RegistryRequest| async move {
        let call = handler::Call {
            env: &registry.env,
            sql: registry.state.storage().sql(),
            now: now_ms(),
        };
        let value = request.dispatch(&call).await?;
        // Deploys, rollbacks and deletes move schedules: keep the alarm on the earliest.
        registry.reschedule(None).await?;
        Ok(value)
    })
    .await
});

impl WorkerRegistry {
    /// Starts one run for each due schedule; true when one could not be started (retry soon).
    async fn fire_due(&self) -> Result<bool> {
        let sql = self.state.storage().sql();
        let now = now_ms();
        let mut retry = false;
        for (name, due) in store::due(&sql, now)? {
            if let Err(e) = self.fire(&name, due, now).await {
                console_error!("registry: schedule of {name} due at {due}: {e}");
                retry = true;
            }
        }
        Ok(retry)
    }

    async fn fire(&self, name: &str, due: i64, now: i64) -> Result<()> {
        let sql = self.state.storage().sql();
        let Some(row) = store::worker(&sql, name)? else {
            return Ok(());
        };
        let version = store::version(&sql, name, row.record.current_version)?
            .ok_or_else(|| Error::internal(format!("{name} has no current version")))?;
        let Some(schedule) = version.manifest.triggers.schedule.clone() else {
            store::fired(&sql, name, now, None)?;
            return Ok(());
        };
        let plan = schedule::fire(&schedule, due, now);
        if let Some(due_at) = plan.run_for {
            let call = handler::Call {
                env: &self.env,
                sql: sql.clone(),
                now,
            };
            let op = PrepareRun {
                name: name.to_string(),
                version: None,
                trigger: Trigger::Schedule,
                inputs: schedule.inputs.clone(),
                files: Vec::new(),
                replay_of: None,
                hook_id: None,
                webhook_key: None,
            };
            let prepared = api::RegistryHandler::prepare_run(&call, op).await?;
            let mut spec = prepared.spec;
            spec.due_at = Some(due_at);
            let model = prepared.manifest.model.clone();
            let run = crate::runs::RunSpec::for_worker(
                spec,
                &prepared.manifest.title,
                model,
                Some(format!("schedule:{name}:{due_at}")),
                row.origin.clone(),
            );
            Ledger::get(&self.env)?
                .call(CreateRun {
                    principal: row.record.created_by.clone(),
                    spec: run,
                    task_ttl_ms: None,
                })
                .await?;
        }
        store::fired(&sql, name, now, plan.next)
    }

    /// Sets the alarm to the earliest fire time (or `soon`, if earlier).
    async fn reschedule(&self, soon: Option<i64>) -> Result<()> {
        let next = store::next_fire(&self.state.storage().sql())?;
        let target = match (next, soon) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let storage = self.state.storage();
        match target {
            Some(at) => {
                if storage.get_alarm().await? != Some(at) {
                    storage.set_alarm(alarm_offset(at)).await?;
                }
            }
            None => storage.delete_alarm().await?,
        }
        Ok(())
    }
}
