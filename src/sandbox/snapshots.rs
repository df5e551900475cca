//! The sandbox's workspace snapshots in R2: storing the daemon's snapshot as the latest (the
//! one before is deleted), restoring the latest into a daemon that lost the files, and copying
//! the workspace for a fork.

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
        let now = now_ms();
        let key = snapshot_key(&record.id, now);
        let size = self.store_snapshot_as(&key, snapshot).await?;
        if let Some(old) = record.snapshot_key.replace(key) {
            if !crate::templates::is_template_key(&old) {
                let _ = self.env.bucket(BUCKET)?.delete(old).await;
            }
        }
        record.snapshot_bytes = size;
        record.snapshot_at = Some(now);
        Ok(())
    }

    /// Copies the workspace as it is now — a fresh snapshot while the sandbox runs, its latest
    /// snapshot while it is paused — to R2 under `key` (a fork's first snapshot, a template).
    /// `None` when a paused sandbox never had one (the copy starts empty).
    pub(super) async fn copy_workspace(
        &self,
        record: &SandboxRecord,
        key: &str,
    ) -> Result<Option<(String, Option<i64>)>> {
        if record.status == crate::sandboxes::Status::Running {
            let snapshot = self.ready().await?.snapshot().await?;
            let size = self.store_snapshot_as(key, snapshot).await?;
            return Ok(Some((key.to_string(), size)));
        }
        let Some(latest) = &record.snapshot_key else {
            return Ok(None);
        };
        let size = self.copy_object(latest, key).await?;
        Ok(Some((key.to_string(), Some(size))))
    }

    /// Copies the R2 object `from` to `to`; its size.
    pub(super) async fn copy_object(&self, from: &str, to: &str) -> Result<i64> {
        let bucket = self.env.bucket(BUCKET)?;
        let object = bucket
            .get(from)
            .execute()
            .await?
            .ok_or_else(|| Error::internal(format!("snapshot {from} is missing from R2")))?;
        let size = object.size() as i64;
        let body = object
            .body()
            .ok_or_else(|| Error::internal("snapshot has no body"))?;
        let data = match body.response_body()? {
            ResponseBody::Stream(stream) => Data::ReadableStream(stream),
            ResponseBody::Body(bytes) => Data::Bytes(bytes),
            ResponseBody::Empty => Data::Empty,
        };
        bucket.put(to, data).execute().await?;
        Ok(size)
    }

    /// Streams a daemon snapshot to R2 under `key`; its size, when the daemon said.
    async fn store_snapshot_as(&self, key: &str, snapshot: Response) -> Result<Option<i64>> {
        let size = snapshot
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.parse::<i64>().ok());
        let ResponseBody::Stream(stream) = snapshot.body().clone() else {
            return Err(Error::internal("the daemon sent an empty snapshot"));
        };
        self.env
            .bucket(BUCKET)?
            .put(key, Data::ReadableStream(stream))
            .execute()
            .await?;
        Ok(size)
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
