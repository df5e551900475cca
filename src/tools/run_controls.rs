//! What `opencode_run_task` and `workers_run` share beyond their own parameters: a budget
//! (`maxCostUsd`, `maxTokens`, `maxDurationSeconds`) and a completion callback (`callbackUrl`),
//! each checked here the same way for both.

use crate::budget::Budget;
use crate::callbacks;
use crate::config::{self, runs as settings};
use crate::error::{Error, Result};
use worker::Env;

/// A run's budget and callback, checked.
#[derive(Debug, Default)]
pub struct Controls {
    pub budget: Option<Budget>,
    pub callback_url: Option<String>,
}

impl Controls {
    /// Checks the four shared parameters.
    pub fn check(
        env: &Env,
        max_cost_usd: Option<f64>,
        max_tokens: Option<u64>,
        max_duration_seconds: Option<u64>,
        callback_url: Option<String>,
    ) -> Result<Controls> {
        Ok(Controls {
            budget: budget(env, max_cost_usd, max_tokens, max_duration_seconds)?,
            callback_url: callback(env, callback_url)?,
        })
    }

    /// Puts them on a run's spec.
    pub fn apply(self, spec: &mut crate::runs::RunSpec) {
        spec.budget = self.budget;
        spec.callback_url = self.callback_url;
    }
}

/// The highest `maxCostUsd` accepted.
const MAX_COST_USD: f64 = 10_000.0;

/// The run's own budget as given (`None` when it sets no limit): each limit must be positive,
/// and the time no longer than the deployment lets any run take.
fn budget(
    env: &Env,
    max_cost_usd: Option<f64>,
    max_tokens: Option<u64>,
    max_duration_seconds: Option<u64>,
) -> Result<Option<Budget>> {
    if let Some(cost) = max_cost_usd {
        if !cost.is_finite() || cost <= 0.0 || cost > MAX_COST_USD {
            return Err(Error::invalid(format!(
                "`maxCostUsd` must be above 0 and at most {MAX_COST_USD}; got {cost}"
            )));
        }
    }
    if max_tokens == Some(0) {
        return Err(Error::invalid("`maxTokens` must be at least 1"));
    }
    if let Some(seconds) = max_duration_seconds {
        let most = config::max_run_ms(env) / 1000;
        if seconds == 0 || seconds as i64 > most {
            return Err(Error::invalid(format!(
                "`maxDurationSeconds` must be 1 to {most} (this deployment's \
                 {}); got {seconds}",
                config::MAX_RUN_DURATION
            )));
        }
    }
    let budget = Budget {
        max_cost_usd,
        max_tokens,
        max_duration_seconds,
    };
    Ok((!budget.is_empty()).then_some(budget))
}

/// A checked callback URL: the deployment must be able to sign callbacks, and the target must
/// pass `callbacks::check_url`.
fn callback(env: &Env, url: Option<String>) -> Result<Option<String>> {
    let Some(url) = url else {
        return Ok(None);
    };
    if settings::callback_secret(env).is_none() {
        return Err(Error::not_configured(format!(
            "this deployment cannot sign callbacks ({} is not set): omit `callbackUrl`, or ask \
             its operator to set it",
            settings::CALLBACK_SECRET
        )));
    }
    let checked = callbacks::check_url(&url, &settings::callback_allowed_hosts(env))?;
    Ok(Some(checked.to_string()))
}
