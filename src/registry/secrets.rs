//! Sandbox secrets in the registry: values the owner sets on the secrets page, sealed like
//! worker secrets (under their own scope, so neither kind opens as the other) and revealed only
//! to sandbox objects, which hand them to the egress proxy — never to a tool.

use super::api::{Revealed, SandboxSecretInfo};
use super::handler::Call;
use super::store::{self, sealed_name, SecretRow, SANDBOX_SCOPE};
use crate::config::workers as settings;
use crate::error::{Error, Result};
use crate::rpc::Ack;
use crate::seal;
use std::collections::BTreeMap;

impl Call<'_> {
    fn key(&self) -> Result<Vec<u8>> {
        settings::secrets_key(self.env).ok_or_else(|| {
            Error::not_configured(format!(
                "secrets need {} (32+ characters) on this deployment",
                settings::SECRETS_KEY
            ))
        })
    }

    pub(super) fn set_sandbox_secret(
        &self,
        name: &str,
        value: &str,
        principal: String,
    ) -> Result<SandboxSecretInfo> {
        let key = self.key()?;
        super::api::check_sandbox_secret_name(name)?;
        if !handoff_wire::rules::is_secret_value(value) {
            return Err(Error::invalid(format!(
                "the value must be 1 to {} characters a request header can carry (printable \
                 ASCII and spaces, no line breaks)",
                handoff_wire::rules::SECRET_VALUE_MAX
            )));
        }
        let sealed = seal::seal(&key, &sealed_name(SANDBOX_SCOPE, name), value)?;
        store::put_secret(
            &self.sql,
            &SecretRow {
                scope: SANDBOX_SCOPE.into(),
                name: name.into(),
                sealed,
                updated_at: self.now,
                updated_by: principal.clone(),
            },
        )?;
        Ok(SandboxSecretInfo {
            name: name.into(),
            updated_at: self.now,
            updated_by: principal,
        })
    }

    pub(super) fn delete_sandbox_secret(&self, name: &str) -> Result<Ack> {
        if !store::delete_secret(&self.sql, SANDBOX_SCOPE, name)? {
            return Err(Error::not_found(format!("no secret {name} is set")));
        }
        Ok(Ack {})
    }

    pub(super) fn sandbox_secrets(&self) -> Result<Vec<SandboxSecretInfo>> {
        Ok(
            store::secrets_where(&self.sql, "WHERE scope = ?", vec![SANDBOX_SCOPE.into()])?
                .into_iter()
                .map(|row| SandboxSecretInfo {
                    name: row.name,
                    updated_at: row.updated_at,
                    updated_by: row.updated_by,
                })
                .collect(),
        )
    }

    pub(super) fn reveal_sandbox_secrets(&self, names: Vec<String>) -> Result<Revealed> {
        let mut values = BTreeMap::new();
        let mut missing = Vec::new();
        for name in names {
            let row = store::secrets_where(
                &self.sql,
                "WHERE scope = ? AND name = ?",
                vec![SANDBOX_SCOPE.into(), name.as_str().into()],
            )?
            .pop();
            match row {
                Some(row) => {
                    let sealed_as = sealed_name(SANDBOX_SCOPE, &row.name);
                    values.insert(name, seal::open(&self.key()?, &sealed_as, &row.sealed)?);
                }
                None => missing.push(name),
            }
        }
        Ok(Revealed { values, missing })
    }

    /// The secrets a worker declares that are set neither for it nor for every worker.
    pub(super) fn unset_secrets(&self, manifest: &crate::workers::Manifest) -> Result<Vec<String>> {
        let mut missing = Vec::new();
        for name in &manifest.secrets {
            let rows = store::secrets_where(
                &self.sql,
                "WHERE name = ? AND scope IN (?, '')",
                vec![name.as_str().into(), manifest.name.as_str().into()],
            )?;
            if rows.is_empty() {
                missing.push(name.clone());
            }
        }
        Ok(missing)
    }
}
