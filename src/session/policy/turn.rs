//! Whether the agent's turn is over: the driver's looks at a working agent judged, and how long
//! the model has been silent.

/// How long the agent may stay idle without answering the prompt.
pub const FIRST_ANSWER_MS: i64 = 120_000;
/// How long the agent may stay idle with an answer that never completed before the turn is
/// taken as over.
pub const UNSETTLED_GRACE_MS: i64 = 30_000;

/// What one look at the working agent saw.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// OpenCode reports the session idle.
    pub idle: bool,
    /// The agent started an answer to this run's prompt.
    pub answered: bool,
    /// That answer completed.
    pub settled: bool,
    /// The model call behind the answer failed.
    pub errored: bool,
    pub now: i64,
    /// Milliseconds since the task was handed over.
    pub waited_ms: i64,
    /// Since when the agent has been idle with an unfinished answer (from the previous look).
    pub idle_unsettled_since: Option<i64>,
}

/// What the driver does after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Keep following the agent.
    Working,
    /// The turn is over: finish the run.
    Over,
    /// The agent went idle without ever answering.
    NeverAnswered,
}

/// Judges a look: the verdict, and the `idle_unsettled_since` to remember for the next one.
/// An answer that stays unfinished while the agent is idle (it died mid-step) ends the turn
/// after a grace period rather than at the stall watchdog.
pub fn judge(look: &Look) -> (Turn, Option<i64>) {
    let unsettled_since = (look.idle && look.answered && !look.settled)
        .then(|| look.idle_unsettled_since.unwrap_or(look.now));
    let unsettled_for = unsettled_since.map_or(0, |since| look.now - since);
    let turn = if look.idle && (look.settled || look.errored || unsettled_for > UNSETTLED_GRACE_MS)
    {
        Turn::Over
    } else if look.idle && !look.answered && look.waited_ms > FIRST_ANSWER_MS {
        Turn::NeverAnswered
    } else {
        Turn::Working
    };
    (turn, unsettled_since)
}

/// Tracks how long the model has been silent: `previous` quiet spell (the answers' motion and
/// since when it is unchanged) carried on, restarted, or ended (`None`) when the agent is not
/// waiting on the model (idle, retrying, or running a tool).
pub fn quiet(
    previous: Option<(u64, i64)>,
    waiting_on_model: bool,
    motion: u64,
    now: i64,
) -> Option<(u64, i64)> {
    if !waiting_on_model {
        return None;
    }
    match previous {
        Some((seen, since)) if seen == motion => Some((seen, since)),
        _ => Some((motion, now)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look() -> Look {
        Look {
            idle: true,
            answered: true,
            settled: true,
            errored: false,
            now: 1_000_000,
            waited_ms: 5_000,
            idle_unsettled_since: None,
        }
    }

    #[test]
    fn a_quiet_spell_lasts_while_the_model_sends_nothing() {
        // Starts when the agent waits on the model, lasts while nothing arrives.
        let spell = quiet(None, true, 7, 1_000);
        assert_eq!(spell, Some((7, 1_000)));
        assert_eq!(quiet(spell, true, 7, 9_000), Some((7, 1_000)));
        // Anything new from the model starts it afresh.
        assert_eq!(quiet(spell, true, 8, 9_000), Some((8, 9_000)));
        // A running tool, an idle or retrying agent: no spell.
        assert_eq!(quiet(spell, false, 7, 9_000), None);
    }

    #[test]
    fn a_settled_or_failed_answer_ends_the_turn_once_the_agent_is_idle() {
        assert_eq!(judge(&look()).0, Turn::Over);
        let errored = Look {
            settled: false,
            answered: false,
            errored: true,
            ..look()
        };
        assert_eq!(judge(&errored).0, Turn::Over);
        let busy = Look {
            idle: false,
            ..look()
        };
        assert_eq!(judge(&busy), (Turn::Working, None));
    }

    #[test]
    fn an_unfinished_answer_of_an_idle_agent_ends_the_turn_after_the_grace_period() {
        let first = Look {
            settled: false,
            ..look()
        };
        // The first idle look starts the clock.
        assert_eq!(judge(&first), (Turn::Working, Some(first.now)));
        let within = Look {
            idle_unsettled_since: Some(first.now - UNSETTLED_GRACE_MS),
            ..first
        };
        assert_eq!(judge(&within).0, Turn::Working);
        let after = Look {
            idle_unsettled_since: Some(first.now - UNSETTLED_GRACE_MS - 1),
            ..first
        };
        assert_eq!(judge(&after).0, Turn::Over);
        // Busy again: the clock is forgotten.
        let busy = Look {
            idle: false,
            ..within
        };
        assert_eq!(judge(&busy), (Turn::Working, None));
    }

    #[test]
    fn an_agent_idle_without_answering_is_given_up_after_the_first_answer_window() {
        let silent = Look {
            answered: false,
            settled: false,
            waited_ms: FIRST_ANSWER_MS,
            ..look()
        };
        assert_eq!(judge(&silent).0, Turn::Working);
        let too_long = Look {
            waited_ms: FIRST_ANSWER_MS + 1,
            ..silent
        };
        assert_eq!(judge(&too_long).0, Turn::NeverAnswered);
    }
}
