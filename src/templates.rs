//! Sandbox templates: a workspace made once — by setup commands in a build sandbox, or copied
//! from a sandbox as it is — and the settings to go with it, from which new sandboxes start
//! ready instead of running the setup again.

use crate::names::named_enum;
use handoff_wire::SandboxSpec;
use serde::{Deserialize, Serialize};

named_enum! {
/// Where a template is in its making.
pub enum TemplateStatus {
    /// Its setup commands run in a build sandbox.
    Building,
    /// Sandboxes can start from it.
    Ready,
    /// Its setup failed (or its build sandbox was lost); `error` says how.
    Failed,
}
}

/// Longest template name.
pub const NAME_MAX: usize = 64;
/// The most setup commands.
pub const SETUP_MAX: usize = 50;
/// Longest setup command.
pub const COMMAND_MAX: usize = 4096;
/// How long a setup may run (the daemon's limit for one process).
pub const BUILD_TIMEOUT_MS: u64 = handoff_wire::EXEC_MAX_TIMEOUT_MS;

/// A template as the registry keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TemplateRecord {
    pub name: String,
    pub description: String,
    pub status: TemplateStatus,
    /// The sandbox it was copied from, when it was.
    pub from_sandbox: Option<String>,
    /// The setup commands, when it was built from them.
    pub setup: Vec<String>,
    /// Settings sandboxes made from it start with (no secrets).
    pub spec: SandboxSpec,
    pub idle_timeout_s: i64,
    /// The workspace in R2, once ready.
    pub snapshot_key: Option<String>,
    pub bytes: Option<i64>,
    /// While building: the build sandbox and the setup's process there.
    pub build_sandbox: Option<String>,
    pub build_process: Option<u64>,
    pub error: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub ready_at: Option<i64>,
}

/// Template names: 1–64 of `a-z 0-9 -`, starting with a letter.
pub fn is_template_name(name: &str) -> bool {
    name.len() <= NAME_MAX
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Where a template's workspace is kept.
pub fn snapshot_key(name: &str, at_ms: i64) -> String {
    format!("{PREFIX}{name}/workspace-{at_ms}.tar.gz")
}

const PREFIX: &str = "templates/";

/// Whether an R2 key is a template's (which sandboxes made from it start from, and never
/// delete).
pub fn is_template_key(key: &str) -> bool {
    key.starts_with(PREFIX)
}

/// The setup commands as one script that stops at the first failure and says which step ran.
pub fn setup_script(setup: &[String]) -> String {
    let mut script = String::from("set -e\n");
    for (i, command) in setup.iter().enumerate() {
        script.push_str(&format!(
            "echo '--- handoff template setup step {} of {}' >&2\n{command}\n",
            i + 1,
            setup.len()
        ));
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(is_template_name("python-3"));
        for bad in ["", "3py", "Py", "a b", "a/b", &"a".repeat(65)] {
            assert!(!is_template_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_script_stops_at_the_first_failure() {
        let script = setup_script(&["true".into(), "false".into(), "touch x".into()]);
        assert!(script.starts_with("set -e\n"));
        assert!(script.contains("step 2 of 3"));
    }
}
