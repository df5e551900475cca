//! Delivering completion callbacks from the ledger's alarm: each due delivery is POSTed once per
//! round (its target checked again, no redirects followed, ten seconds at most), and its attempt
//! recorded with what follows it (`callbacks::after_attempt`). The body is the run as
//! `opencode_get_result` (or `workers_run_get`) shows it, signed over its timestamp.

use super::{find_run, store, RunLedger};
use crate::callbacks::{self, Attempt, Delivery, EVENT_RUN_ENDED};
use crate::config::{self, runs as settings};
use crate::error::{Error, Result};
use crate::links;
use crate::mac;
use crate::run_views::RunView;
use crate::runs::RunRecord;
use crate::time::now_ms;
use crate::workers::run_view::run_view;
use futures::future::{select, Either};
use serde_json::json;
use std::time::Duration;
use worker::{Delay, Env, Fetch, Headers, Method, Request, RequestInit, SqlStorage};

/// Deliveries attempted per alarm round (the rest wait for the next, which follows at once).
const PER_ROUND: u32 = 10;
/// The longest an attempt may take, answer included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

impl RunLedger {
    /// Attempts every delivery that is due.
    pub(super) async fn deliver_callbacks(&self) -> Result<()> {
        let sql = self.sql();
        let (base, window) = (
            settings::callback_retry_ms(&self.env),
            settings::callback_window_ms(&self.env),
        );
        for (run_id, url, delivery) in store::due_deliveries(&sql, now_ms(), PER_ROUND)? {
            let started = now_ms();
            let result = self.attempt(&sql, &run_id, &url, &delivery).await;
            let ended = now_ms();
            let attempt = Attempt {
                at: started,
                status: result.as_ref().ok().copied(),
                error: result.err().map(|e| e.message),
                duration_ms: (ended - started).max(0) as u64,
            };
            let (state, next) = callbacks::after_attempt(&delivery, &attempt, base, window);
            store::record_attempt(&sql, &delivery, attempt, state, next)?;
        }
        Ok(())
    }

    /// One POST; the receiver's status, or why there was none.
    async fn attempt(
        &self,
        sql: &SqlStorage,
        run_id: &str,
        url: &str,
        delivery: &Delivery,
    ) -> Result<u16> {
        let secret = settings::callback_secret(&self.env).ok_or_else(|| {
            Error::not_configured(format!(
                "{} is no longer set, so the callback cannot be signed",
                settings::CALLBACK_SECRET
            ))
        })?;
        // Checked again: the deployment's exemptions may have changed since the run started.
        let target = callbacks::check_url(url, &settings::callback_allowed_hosts(&self.env))?;
        let run = find_run(sql, run_id)?;
        let body = body(&self.env, run, &delivery.id)?;
        let timestamp = now_ms() / 1000;
        let signature = mac::hmac_hex(
            &secret,
            callbacks::signed_message(timestamp, &body).as_bytes(),
        );
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        headers.set("user-agent", "handoff-callbacks/1")?;
        headers.set("handoff-delivery", &delivery.id)?;
        headers.set("handoff-event", EVENT_RUN_ENDED)?;
        headers.set(
            "handoff-signature",
            &format!("t={timestamp},v1={signature}"),
        )?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(body.into()))
            .with_redirect(worker::RequestRedirect::Manual);
        let request = Request::new_with_init(target.as_str(), &init)?;
        let send = async move { Fetch::Request(request).send().await };
        match select(Box::pin(send), Box::pin(Delay::from(ATTEMPT_TIMEOUT))).await {
            Either::Left((Ok(response), _)) => Ok(response.status_code()),
            Either::Left((Err(e), _)) => Err(Error::unavailable(format!(
                "the receiver could not be reached: {e}"
            ))),
            Either::Right(_) => Err(Error::unavailable(format!(
                "the receiver did not answer within {} s",
                ATTEMPT_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// The callback's JSON body: the event, the delivery id and the run as its tool shows it (with
/// fresh signed links, without the callback's own state).
fn body(env: &Env, run: RunRecord, delivery_id: &str) -> Result<String> {
    let now = now_ms();
    let base = config::public_url(env)
        .or_else(|| run.origin.clone())
        .unwrap_or_default();
    let page = links::run_page_url(env, &base, &run.id, now);
    let view = match run.worker.is_some() {
        true => {
            let id = run.id.clone();
            let mut view = run_view(run, now).ok_or_else(|| Error::internal("not a worker run"))?;
            view.web_ui_url = page;
            view.callback = None;
            for file in &mut view.outputs {
                file.download_url = links::output_url(env, &base, &id, &file.path, now);
            }
            serde_json::to_value(view)?
        }
        false => {
            let mut view = RunView::at(run, page, now);
            view.callback = None;
            serde_json::to_value(view)?
        }
    };
    let body = json!({"event": EVENT_RUN_ENDED, "deliveryId": delivery_id, "run": view});
    Ok(body.to_string())
}
