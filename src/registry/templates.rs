//! Sandbox templates in the registry: created building or ready, finished once (a build's
//! outcome only lands on the build it belongs to), deleted.

use super::handler::Call;
use super::store::templates::{all, delete, load, save};
use crate::error::{Error, Result};
use crate::templates::{TemplateRecord, TemplateStatus};

/// The most templates a deployment keeps.
const TEMPLATES_MAX: usize = 100;

fn not_found(name: &str) -> Error {
    Error::not_found(format!(
        "no template {name}; sandbox_template_list shows them"
    ))
}

impl Call<'_> {
    /// Stores a new template; a name in use is refused unless its template failed.
    pub(super) fn put_template(&self, record: TemplateRecord) -> Result<TemplateRecord> {
        if let Some(existing) = load(&self.sql, &record.name)? {
            if existing.status != TemplateStatus::Failed {
                return Err(Error::conflict(format!(
                    "template {} already exists ({}); delete it first to make it again",
                    record.name,
                    existing.status.as_str()
                )));
            }
        } else if self.templates()?.len() >= TEMPLATES_MAX {
            return Err(Error::invalid(format!(
                "a deployment keeps at most {TEMPLATES_MAX} templates; delete one first"
            )));
        }
        save(&self.sql, &record)?;
        Ok(record)
    }

    pub(super) fn template(&self, name: &str) -> Result<TemplateRecord> {
        load(&self.sql, name)?.ok_or_else(|| not_found(name))
    }

    pub(super) fn templates(&self) -> Result<Vec<TemplateRecord>> {
        all(&self.sql)
    }

    /// Records a build's outcome — only while the template is still building in
    /// `build_sandbox` (a second report of the same build changes nothing).
    pub(super) fn finish_template(
        &self,
        name: &str,
        build_sandbox: &str,
        outcome: std::result::Result<(String, Option<i64>), String>,
    ) -> Result<TemplateRecord> {
        let mut record = self.template(name)?;
        let current = record.status == TemplateStatus::Building
            && record.build_sandbox.as_deref() == Some(build_sandbox);
        if !current {
            return Ok(record);
        }
        match outcome {
            Ok((key, bytes)) => {
                record.status = TemplateStatus::Ready;
                record.snapshot_key = Some(key);
                record.bytes = bytes;
                record.ready_at = Some(self.now);
            }
            Err(error) => {
                record.status = TemplateStatus::Failed;
                record.error = Some(error);
            }
        }
        save(&self.sql, &record)?;
        Ok(record)
    }

    /// Removes a template; the caller deletes what it points at (workspace, build sandbox).
    pub(super) fn delete_template(&self, name: &str) -> Result<TemplateRecord> {
        let record = self.template(name)?;
        delete(&self.sql, name)?;
        Ok(record)
    }
}
