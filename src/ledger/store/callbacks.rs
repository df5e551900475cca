//! Completion callbacks: a delivery opened in the same write that ends a run (so none is lost),
//! the attempts the alarm makes, and when the next is due.

use super::*;
use crate::callbacks::{Attempt, Delivery, DeliveryState, KEPT_ATTEMPTS};
use crate::ids;

#[derive(Deserialize)]
struct DeliveryRow {
    delivery_id: String,
    run_id: String,
    url: String,
    state: String,
    attempt_count: i64,
    attempts: String,
    next_at: Option<i64>,
    created_at: i64,
}

impl DeliveryRow {
    fn into_delivery(self) -> (String, String, Delivery) {
        let delivery = Delivery {
            id: self.delivery_id,
            state: self.state.parse().unwrap_or(DeliveryState::Failed),
            attempt_count: self.attempt_count.max(0) as u32,
            attempts: serde_json::from_str(&self.attempts).unwrap_or_default(),
            next_at: self.next_at,
            created_at: self.created_at,
        };
        (self.run_id, self.url, delivery)
    }
}

const DELIVERY_COLUMNS: &str =
    "delivery_id, run_id, url, state, attempt_count, attempts, next_at, created_at";

/// Opens the delivery of a run that just ended with a callback URL (once: a run ends once).
pub(super) fn open_delivery(sql: &SqlStorage, run_id: &str, now: i64) -> Result<()> {
    sql.exec(
        "INSERT OR IGNORE INTO callbacks (delivery_id, run_id, url, state, next_at, created_at) \
         SELECT ?, id, callback_url, 'pending', ?, ? FROM runs \
         WHERE id = ? AND callback_url IS NOT NULL",
        vec![
            ids::new_id(ids::DELIVERY).into(),
            now.into(),
            now.into(),
            run_id.into(),
        ],
    )?;
    Ok(())
}

/// Holds the unattempted delivery of a run that ended elsewhere (cancelled, timed out by the
/// watchdog) until `until`: its driver is stopping the agent and reports what the run did
/// (`release_delivery`), which the callback should carry.
pub fn hold_delivery(sql: &SqlStorage, run_id: &str, until: i64) -> Result<()> {
    sql.exec(
        "UPDATE callbacks SET next_at = ? \
         WHERE run_id = ? AND state = 'pending' AND attempt_count = 0",
        vec![until.into(), run_id.into()],
    )?;
    Ok(())
}

/// A held delivery is due now (the run's late report arrived).
pub(super) fn release_delivery(sql: &SqlStorage, run_id: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE callbacks SET next_at = ? \
         WHERE run_id = ? AND state = 'pending' AND attempt_count = 0 AND next_at > ?",
        vec![now.into(), run_id.into(), now.into()],
    )?;
    Ok(())
}

/// A run's delivery, if it has one.
pub fn delivery_of(sql: &SqlStorage, run_id: &str) -> Result<Option<Delivery>> {
    let query = format!("SELECT {DELIVERY_COLUMNS} FROM callbacks WHERE run_id = ?");
    Ok(sql
        .exec(&query, vec![run_id.into()])?
        .to_array::<DeliveryRow>()?
        .pop()
        .map(|row| row.into_delivery().2))
}

/// Deliveries due at `now` (oldest first, at most `limit`): run id, URL and delivery.
pub fn due_deliveries(
    sql: &SqlStorage,
    now: i64,
    limit: u32,
) -> Result<Vec<(String, String, Delivery)>> {
    let query = format!(
        "SELECT {DELIVERY_COLUMNS} FROM callbacks WHERE next_at IS NOT NULL AND next_at <= ? \
         ORDER BY next_at LIMIT ?"
    );
    Ok(sql
        .exec(&query, vec![now.into(), i64::from(limit).into()])?
        .to_array::<DeliveryRow>()?
        .into_iter()
        .map(DeliveryRow::into_delivery)
        .collect())
}

/// Records an attempt and what follows it (the latest `KEPT_ATTEMPTS` attempts are kept).
pub fn record_attempt(
    sql: &SqlStorage,
    delivery: &Delivery,
    attempt: Attempt,
    state: DeliveryState,
    next_at: Option<i64>,
) -> Result<()> {
    let mut attempts = delivery.attempts.clone();
    attempts.push(attempt);
    let drop = attempts.len().saturating_sub(KEPT_ATTEMPTS);
    attempts.drain(..drop);
    sql.exec(
        "UPDATE callbacks SET state = ?, attempt_count = attempt_count + 1, attempts = ?, \
         next_at = ? WHERE delivery_id = ?",
        vec![
            state.as_str().into(),
            serde_json::to_string(&attempts)?.into(),
            next_at.into(),
            delivery.id.as_str().into(),
        ],
    )?;
    Ok(())
}
