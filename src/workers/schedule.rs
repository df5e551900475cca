//! Worker schedules: cron patterns (croner: five fields, or six with seconds; `@daily` and the
//! other aliases; `L`, `W`, `#`) evaluated in an IANA time zone (jiff, with the zones' rules
//! from `zones.rs`), and the policy for fires missed while handoff was down.
//!
//! Missed fires: when the registry wakes up and a schedule's fire time has passed, it starts
//! **one** run for it (marked late by how much) and moves on to the first fire time after now —
//! however many fires were missed, never more than one catch-up run. A missed fire older than
//! [`CATCH_UP_WINDOW_MS`] is skipped instead (a run a day late is rarely wanted).

use croner::parser::{CronParser, Seconds};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A missed fire older than this is skipped rather than caught up.
pub const CATCH_UP_WINDOW_MS: i64 = 24 * 3600 * 1000;
/// How many upcoming fires are checked against the shortest allowed interval.
const INTERVAL_PROBES: usize = 50;

/// A worker's `triggers.schedule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub cron: String,
    /// IANA time zone name (`Europe/Berlin`); `UTC` by default.
    pub timezone: String,
    /// Input values scheduled runs get (beside the inputs' defaults).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub inputs: Map<String, Value>,
}

fn parse(cron: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(cron)
        .map_err(|e| format!("{cron:?} is not a cron pattern: {e}"))
}

fn zone(name: &str) -> Result<TimeZone, String> {
    super::zones::get(name).ok_or_else(|| {
        format!("{name:?} is not a time zone; use an IANA name such as UTC or Europe/Berlin")
    })
}

/// Checks a schedule: a pattern croner reads, a known time zone, fires no closer together than
/// `min_interval_s`, and at least one fire in the future.
pub fn check(cron: &str, timezone: &str, now_ms: i64, min_interval_s: u64) -> Result<(), String> {
    let fires = next_fires(cron, timezone, now_ms, INTERVAL_PROBES)?;
    if fires.is_empty() {
        return Err(format!("{cron:?} never fires"));
    }
    let min_ms = (min_interval_s * 1000) as i64;
    if let Some(gap) = fires.windows(2).map(|w| w[1] - w[0]).min() {
        if gap < min_ms {
            return Err(format!(
                "{cron:?} fires {} s apart; schedules may fire at most every {min_interval_s} s",
                gap / 1000
            ));
        }
    }
    Ok(())
}

/// The next `count` fire times strictly after `after_ms` (milliseconds since the epoch).
pub fn next_fires(
    cron: &str,
    timezone: &str,
    after_ms: i64,
    count: usize,
) -> Result<Vec<i64>, String> {
    let pattern = parse(cron)?;
    let tz = zone(timezone)?;
    let start = Timestamp::from_millisecond(after_ms)
        .map_err(|e| format!("time out of range: {e}"))?
        .to_zoned(tz);
    let mut out = Vec::with_capacity(count);
    let mut cursor = start;
    while out.len() < count {
        match pattern.find_next_occurrence(&cursor, false) {
            Ok(next) => {
                out.push(next.timestamp().as_millisecond());
                cursor = next;
            }
            Err(_) => break,
        }
    }
    Ok(out)
}

/// A cron pattern in words (croner's description).
pub fn describe(cron: &str) -> String {
    parse(cron).map(|c| c.describe()).unwrap_or_default()
}

/// What the registry does when a schedule is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    /// Start a run for the fire due at this time (`None`: the missed fire was too old).
    pub run_for: Option<i64>,
    /// How late the run starts (milliseconds past its due time).
    pub late_ms: i64,
    /// The next fire time, strictly after now.
    pub next: Option<i64>,
}

/// The missed-fire policy: one run for a due fire (however many were missed), none when it is
/// older than the catch-up window, and the next fire time after `now_ms`.
pub fn fire(schedule: &Schedule, due_ms: i64, now_ms: i64) -> Fire {
    let late_ms = (now_ms - due_ms).max(0);
    let next = next_fires(&schedule.cron, &schedule.timezone, now_ms, 1)
        .ok()
        .and_then(|v| v.first().copied());
    Fire {
        run_for: (late_ms <= CATCH_UP_WINDOW_MS).then_some(due_ms),
        late_ms,
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn fires_follow_the_time_zone_across_daylight_saving() {
        // 09:00 in Berlin: 08:00 UTC in winter, 07:00 UTC in summer (DST began 2026-03-29).
        let fires =
            next_fires("0 9 * * *", "Europe/Berlin", ms("2026-03-27T12:00:00Z"), 3).unwrap();
        assert_eq!(
            fires,
            vec![
                ms("2026-03-28T08:00:00Z"),
                ms("2026-03-29T07:00:00Z"),
                ms("2026-03-30T07:00:00Z")
            ]
        );
        // 02:30 does not exist on the day the clocks jump: that day's run starts at 03:00 CEST,
        // as in Vixie cron, and the next day's at 02:30 again.
        let gap = next_fires("30 2 * * *", "Europe/Berlin", ms("2026-03-28T12:00:00Z"), 2).unwrap();
        assert_eq!(
            gap,
            vec![ms("2026-03-29T01:00:00Z"), ms("2026-03-30T00:30:00Z")]
        );
    }

    #[test]
    fn seconds_aliases_and_bad_patterns() {
        let every_5s = next_fires("*/5 * * * * *", "UTC", ms("2026-01-01T00:00:01Z"), 2).unwrap();
        assert_eq!(
            every_5s,
            vec![ms("2026-01-01T00:00:05Z"), ms("2026-01-01T00:00:10Z")]
        );
        let daily = next_fires("@daily", "UTC", ms("2026-01-01T10:00:00Z"), 1).unwrap();
        assert_eq!(daily, vec![ms("2026-01-02T00:00:00Z")]);
        assert!(check("61 * * * *", "UTC", 0, 60)
            .unwrap_err()
            .contains("not a cron"));
        assert!(check("* * * * *", "Mars/Olympus", 0, 60)
            .unwrap_err()
            .contains("time zone"));
        assert!(check("* * * * * *", "UTC", 0, 60)
            .unwrap_err()
            .contains("1 s apart"));
        assert!(check("* * * * * *", "UTC", 0, 1).is_ok());
        assert!(check("0 0 30 2 *", "UTC", 0, 60)
            .unwrap_err()
            .contains("never"));
        assert!(describe("0 9 * * 1").to_lowercase().contains("monday"));
    }

    #[test]
    fn missed_fires_give_one_run_never_a_storm() {
        let s = Schedule {
            cron: "*/10 * * * *".into(),
            timezone: "UTC".into(),
            inputs: Map::new(),
        };
        // Down for three hours: 18 fires missed, one run for the due one, next after now.
        let due = ms("2026-01-01T00:00:00Z");
        let now = ms("2026-01-01T03:05:00Z");
        let f = fire(&s, due, now);
        assert_eq!(f.run_for, Some(due));
        assert_eq!(f.late_ms, now - due);
        assert_eq!(f.next, Some(ms("2026-01-01T03:10:00Z")));
        // Down for two days: the missed fire is skipped.
        let f = fire(&s, due, due + 2 * CATCH_UP_WINDOW_MS);
        assert_eq!(f.run_for, None);
    }
}
