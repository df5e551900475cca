//! A finished run's artifacts (transcript, diff) when the bucket refuses them: a write is tried
//! a few times at once; if the bucket still fails, the session keeps the text in its own storage,
//! the run ends listing the artifact as pending, and the session's idle steps write it later
//! (backing off to every five minutes) and tell the ledger once it is stored. After a week of
//! refusals it is given up, and the run says it has no such artifact.

use super::driver::Driver;
use super::store::{self, KeptArtifact};
use crate::artifacts::Artifact;
use crate::config;
use crate::error::Result;
use crate::ledger::api::ArtifactSettled;
use crate::runs::RunOutcome;
use crate::time::now_ms;
use std::time::Duration;
use worker::{console_error, console_warn, Delay};

/// Writes tried at once before the text is kept for later, with the waits between them.
const WAITS_NOW_MS: [u64; 2] = [250, 1000];
/// The longest wait between later tries.
const MAX_WAIT_MS: i64 = 5 * 60 * 1000;
/// How long a kept artifact is tried before it is given up.
const GIVE_UP_MS: i64 = 7 * 24 * 3600 * 1000;

impl Driver<'_> {
    /// Stores a run's artifact and marks it in `outcome` as stored, or — the bucket refusing —
    /// as pending, kept for a later write.
    pub(super) async fn store_artifact(
        &self,
        outcome: &mut RunOutcome,
        run_id: &str,
        artifact: Artifact,
        text: String,
    ) {
        let key = artifact.key(run_id);
        let mut tries = 0;
        let error = loop {
            match self
                .put_artifact(&key, text.as_bytes().to_vec(), artifact.media_type())
                .await
            {
                Ok(()) => return outcome.settle(artifact, true),
                Err(e) if tries < WAITS_NOW_MS.len() => {
                    Delay::from(Duration::from_millis(WAITS_NOW_MS[tries])).await;
                    tries += 1;
                    console_warn!("session {}: storing {key}: {e}", self.session_id);
                }
                Err(e) => break e,
            }
        };
        let now = now_ms();
        match store::keep_artifact(
            &self.sql,
            run_id,
            artifact,
            &text,
            now,
            now + delay(self, 0),
        ) {
            Ok(()) => {
                console_warn!(
                    "session {}: storing {key}: {error}; kept to try again",
                    self.session_id
                );
                outcome.pending.push(artifact);
            }
            Err(e) => console_error!(
                "session {}: storing {key}: {error}; keeping it failed too: {e}",
                self.session_id
            ),
        }
    }

    /// Tries the kept artifacts that are due; returns how long until the next one is, if any is
    /// kept.
    pub(super) async fn flush_artifacts(&self) -> Result<Option<i64>> {
        let now = now_ms();
        while let Some(kept) = store::due_artifact(&self.sql, now)? {
            self.try_kept(&kept, now).await?;
        }
        Ok(store::next_artifact_at(&self.sql)?.map(|at| (at - now).max(0)))
    }

    async fn try_kept(&self, kept: &KeptArtifact, now: i64) -> Result<()> {
        let Ok(artifact) = kept.artifact.parse::<Artifact>() else {
            return store::drop_artifact(&self.sql, &kept.run_id, &kept.artifact);
        };
        let key = artifact.key(&kept.run_id);
        let text = store::artifact_text(&self.sql, kept)?;
        let stored = match self
            .put_artifact(&key, text.as_bytes().to_vec(), artifact.media_type())
            .await
        {
            Ok(()) => true,
            Err(e) if now - kept.since < GIVE_UP_MS => {
                console_warn!(
                    "session {}: storing {key} (try {}): {e}",
                    self.session_id,
                    kept.attempts + 1
                );
                let wait = delay(self, kept.attempts);
                return store::retry_artifact(&self.sql, kept, now + wait);
            }
            Err(e) => {
                console_error!("session {}: giving up storing {key}: {e}", self.session_id);
                false
            }
        };
        self.ledger()?
            .call(ArtifactSettled {
                run_id: kept.run_id.clone(),
                artifact,
                stored,
            })
            .await?;
        store::drop_artifact(&self.sql, &kept.run_id, &kept.artifact)
    }
}

/// The wait before the try after `attempts` failed ones: the poll interval, doubling, at most
/// five minutes.
fn delay(driver: &Driver<'_>, attempts: i64) -> i64 {
    let failures = u32::try_from(attempts.max(0)).unwrap_or(u32::MAX);
    crate::time::backoff_ms(config::poll_interval_ms(driver.env), failures, MAX_WAIT_MS)
}
