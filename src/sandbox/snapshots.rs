//! The sandbox's workspace snapshots in R2: storing the daemon's snapshot as the latest (the
//! one before is deleted) and restoring the latest into a daemon that lost the files.

use super::daemon::Daemon;
use super::SandboxObject;
use crate::artifacts::{snapshot_key, BUCKET};
use crate::error::{Error, Result};
use crate::sandboxes::SandboxRecord;
use crate::time::now_ms;
use worker::{js_sys, wasm_bindgen::JsValue, Data, Response, ResponseBody};

impl SandboxObject {
    /// Streams a snapshot to R2 as the sandbox's latest, replacing the one before.
    pub(super) async fn store_snapshot(
        &self,
        record: &mut SandboxRecord,
        snapshot: Response,
    ) -> Result<()> {
        let size = snapshot
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.parse::<i64>().ok());
        let ResponseBody::Stream(stream) = snapshot.body().clone() else {
            return Err(Error::internal("the daemon sent an empty snapshot"));
        };
        let now = now_ms();
        let key = snapshot_key(&record.id, now);
        let bucket = self.env.bucket(BUCKET)?;
        bucket
            .put(key.as_str(), Data::ReadableStream(stream))
            .execute()
            .await?;
        if let Some(old) = record.snapshot_key.replace(key) {
            let _ = bucket.delete(old).await;
        }
        record.snapshot_bytes = size;
        record.snapshot_at = Some(now);
        Ok(())
    }

    pub(super) async fn restore_snapshot(
        &self,
        record: &SandboxRecord,
        daemon: &Daemon,
    ) -> Result<()> {
        let Some(key) = &record.snapshot_key else {
            return Ok(());
        };
        let bucket = self.env.bucket(BUCKET)?;
        let object = bucket
            .get(key.as_str())
            .execute()
            .await?
            .ok_or_else(|| Error::internal(format!("snapshot {key} is missing from R2")))?;
        let body = object
            .body()
            .ok_or_else(|| Error::internal("snapshot has no body"))?;
        let stream = match body.response_body()? {
            ResponseBody::Stream(stream) => JsValue::from(stream),
            ResponseBody::Body(bytes) => js_sys::Uint8Array::from(bytes.as_slice()).into(),
            ResponseBody::Empty => JsValue::NULL,
        };
        daemon.restore(stream).await?;
        Ok(())
    }
}
