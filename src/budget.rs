//! Run budgets: the most a run may spend (dollars, tokens, seconds) and the one rule that says
//! whether it went over. The credential proxy asks before every model call and refuses once a
//! run is over; the run's session sees the same verdict, stops the agent, pushes the work so
//! far and ends the run `failed` with `budget_exceeded`.
//!
//! Tokens are counted by the proxy from the provider's own answers (`usage`, read by
//! `proxy::meter`), so an agent cannot hide them; the session's reading of OpenCode's count
//! is taken when it is higher.
//! Dollars are OpenCode's cost (its model price table), as the session reports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most one run may spend; each limit is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Dollars of model use (as priced by OpenCode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Tokens of model use: everything the provider counted (input, cached input, output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Seconds from the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_seconds: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.max_cost_usd.is_none()
            && self.max_tokens.is_none()
            && self.max_duration_seconds.is_none()
    }

    /// This budget with every limit it leaves open taken from `defaults`.
    pub fn or(self, defaults: &Budget) -> Budget {
        Budget {
            max_cost_usd: self.max_cost_usd.or(defaults.max_cost_usd),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            max_duration_seconds: self.max_duration_seconds.or(defaults.max_duration_seconds),
        }
    }
}

/// What a run has spent so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Tokens: the proxy's count, or OpenCode's when higher.
    pub tokens: u64,
    /// Model calls the proxy passed.
    pub model_calls: u64,
    pub cost_usd: f64,
    /// Seconds since the run started (0 before it starts).
    pub seconds: u64,
}

/// Which limit a run went over, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub enum Exceeded {
    Cost { used: f64, max: f64 },
    Tokens { used: u64, max: u64 },
    Duration { used: u64, max: u64 },
}

impl Exceeded {
    /// A sentence for `error.message`.
    pub fn message(&self) -> String {
        let what = match self {
            Exceeded::Cost { used, max } => {
                format!("spent ${used:.4} of its ${max:.4} budget (maxCostUsd)")
            }
            Exceeded::Tokens { used, max } => {
                format!("used {used} tokens of its {max} (maxTokens)")
            }
            Exceeded::Duration { used, max } => {
                format!("ran {used} s of its {max} s (maxDurationSeconds)")
            }
        };
        format!(
            "the run {what} and was stopped; its work so far is on its branch if it changed \
             anything. Raise the budget and continue in the same session to go on"
        )
    }
}

/// Whether `spend` is at or over `budget` (the first limit reached, in the order cost,
/// tokens, time). Reaching a limit counts: the next model call would go over it.
pub fn over(budget: &Budget, spend: &Spend) -> Option<Exceeded> {
    if let Some(max) = budget.max_cost_usd {
        if spend.cost_usd >= max {
            return Some(Exceeded::Cost {
                used: spend.cost_usd,
                max,
            });
        }
    }
    if let Some(max) = budget.max_tokens {
        if spend.tokens >= max {
            return Some(Exceeded::Tokens {
                used: spend.tokens,
                max,
            });
        }
    }
    if let Some(max) = budget.max_duration_seconds {
        if spend.seconds >= max {
            return Some(Exceeded::Duration {
                used: spend.seconds,
                max,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_reached_is_the_verdict() {
        let budget = Budget {
            max_cost_usd: Some(1.0),
            max_tokens: Some(1000),
            max_duration_seconds: Some(60),
        };
        let mut spend = Spend::default();
        assert_eq!(over(&budget, &spend), None);
        spend.tokens = 1000;
        assert_eq!(
            over(&budget, &spend),
            Some(Exceeded::Tokens {
                used: 1000,
                max: 1000
            })
        );
        spend.cost_usd = 1.5;
        assert!(matches!(over(&budget, &spend), Some(Exceeded::Cost { .. })));
        let open = Budget::default();
        spend.seconds = 1 << 40;
        assert_eq!(over(&open, &spend), None);
        let message = Exceeded::Duration { used: 61, max: 60 }.message();
        assert!(message.contains("ran 61 s of its 60 s (maxDurationSeconds)"));
    }

    #[test]
    fn a_run_budget_falls_back_to_the_deployment_defaults() {
        let defaults = Budget {
            max_cost_usd: Some(5.0),
            max_tokens: Some(9),
            max_duration_seconds: None,
        };
        let run = Budget {
            max_tokens: Some(3),
            ..Budget::default()
        };
        let merged = run.or(&defaults);
        assert_eq!(merged.max_tokens, Some(3));
        assert_eq!(merged.max_cost_usd, Some(5.0));
        assert_eq!(merged.max_duration_seconds, None);
    }
}
