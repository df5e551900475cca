//! Staging a worker run: the version's folder, `inputs.json` (scalar values, and for each file
//! input its path, name, type and size), the input files under `inputs/`, the webhook payload
//! as `webhook.json`, and an empty `outputs/`. Every write is idempotent, so a restart repeats
//! the step safely.

use super::DIR;
use crate::artifacts;
use crate::error::{Error, Result};
use crate::sandbox::api::{Exec, WriteFile};
use crate::session::driver::{argv, Driver};
use crate::workers::{VersionRecord, WorkerRunSpec};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

impl Driver<'_> {
    pub(super) async fn stage(&self, spec: &WorkerRunSpec, version: &VersionRecord) -> Result<()> {
        let sandbox = self.sandbox()?;
        let mkdir = argv(
            &[
                "mkdir",
                "-p",
                DIR,
                &format!("{DIR}/outputs"),
                &format!("{DIR}/inputs"),
            ],
            None,
        );
        let made = sandbox.call(Exec { request: mkdir }).await?;
        if made.exit_code != Some(0) {
            return Err(Error::internal(format!(
                "could not make the worker's folder: {}",
                made.stderr.trim()
            )));
        }
        let files = version
            .files
            .as_ref()
            .ok_or_else(|| Error::internal("the version came without its files"))?;
        for (path, bytes) in &files.0 {
            self.write(&format!("{DIR}/{path}"), bytes).await?;
        }
        let mut inputs = spec.inputs.clone();
        for file in &spec.files {
            let bytes = self
                .read_artifact(&artifacts::input_file_key(&file.sha256))
                .await?
                .ok_or_else(|| {
                    Error::invalid(format!("the file given for {} is gone", file.name))
                })?;
            let path = format!("inputs/{}", file.name);
            self.write(&format!("{DIR}/{path}"), &bytes).await?;
            inputs.insert(
                file.name.clone(),
                json!({"path": path, "filename": file.filename, "mediaType": file.media_type,
                       "size": file.size}),
            );
        }
        let inputs_json = serde_json::to_vec_pretty(&Value::Object(inputs))?;
        self.write(&format!("{DIR}/inputs.json"), &inputs_json)
            .await?;
        if let Some(key) = &spec.webhook_key {
            let payload = self.read_artifact(key).await?.unwrap_or_default();
            self.write(&format!("{DIR}/webhook.json"), &payload).await?;
        }
        Ok(())
    }

    async fn write(&self, path: &str, bytes: &[u8]) -> Result<()> {
        self.sandbox()?
            .call(WriteFile {
                path: path.to_string(),
                base64: B64.encode(bytes),
            })
            .await?;
        Ok(())
    }

    /// An object of the artifacts bucket, `None` when it is not there.
    pub(super) async fn read_artifact(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let bucket = self.env.bucket(artifacts::BUCKET)?;
        let Some(object) = bucket.get(key).execute().await? else {
            return Ok(None);
        };
        match object.body() {
            Some(body) => Ok(Some(body.bytes().await?)),
            None => Ok(Some(Vec::new())),
        }
    }
}
