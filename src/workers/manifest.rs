//! `worker.yml`: what a validated manifest holds (the README's "worker.yml" section documents
//! the same schema). Reading and checking it is `read.rs`.

use super::inputs::InputSpec;
use super::schedule::Schedule;
use super::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest worker name.
pub(super) const NAME_MAX: usize = 63;
/// Most output files a worker declares.
pub(super) const MAX_OUTPUT_FILES: usize = 20;
/// Most secrets a worker declares.
pub(super) const MAX_SECRETS: usize = 20;
/// Most network rules.
pub(super) const MAX_RULES: usize = 100;
/// Longest run a worker may ask for (6 hours), and the default (10 minutes).
pub const TIMEOUT_MAX_S: u64 = 6 * 3600;
pub(super) const TIMEOUT_DEFAULT_S: u64 = 600;
/// Agent mode: default and largest tool iterations and tokens.
pub(super) const ITERATIONS_DEFAULT: u64 = 50;
pub(super) const ITERATIONS_MAX: u64 = 1000;
pub(super) const TOKENS_DEFAULT: u64 = 1_000_000;
pub(super) const TOKENS_MAX: u64 = 50_000_000;
/// Largest `result.json` schema, as JSON.
pub(super) const RESULT_SCHEMA_MAX: usize = 16 * 1024;
/// The OpenCode tools an agent-mode worker may be allowed.
pub const AGENT_TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "patch",
    "glob",
    "grep",
    "list",
    "todowrite",
    "todoread",
    "webfetch",
];
/// Tools an agent-mode worker gets when it names none: reading and writing files only.
pub(super) const DEFAULT_AGENT_TOOLS: &[&str] = &["read", "write", "edit", "glob", "grep", "list"];

/// A validated `worker.yml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u64,
    pub name: String,
    pub title: String,
    pub description: String,
    pub runtime: Runtime,
    pub entrypoint: String,
    pub inputs: Vec<InputSpec>,
    pub outputs: Outputs,
    pub triggers: Triggers,
    pub secrets: Vec<String>,
    pub network: Network,
    pub limits: Limits,
    /// Agent mode: the OpenCode tools the agent may use.
    pub tools: Vec<String>,
    /// Agent mode: `provider/model` (default: the deployment's).
    pub model: Option<String>,
    pub approvals: Approvals,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outputs {
    pub files: Vec<OutputSpec>,
    /// JSON Schema (a subset: see `result_schema`) `result.json` must match; when set the run
    /// must write `result.json`.
    pub result_schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// Path under `outputs/`.
    pub path: String,
    pub media_type: String,
    pub description: Option<String>,
    /// Whether the run fails without it.
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Triggers {
    pub manual: bool,
    pub schedule: Option<Schedule>,
    pub webhook: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Destinations the run may reach through the egress proxy; empty: none.
    pub allow: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub timeout_seconds: u64,
    pub max_tool_iterations: u64,
    pub max_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Approvals {
    pub required: bool,
    pub label: String,
    /// Destinations the run may reach before it is approved (default none: nothing the worker
    /// does before approval can leave the sandbox beyond these).
    pub allow_before: Vec<String>,
}

/// A script worker's program and arguments, and the environment the program needs.
pub type Command = (Vec<String>, Vec<(&'static str, &'static str)>);

impl Manifest {
    /// The program and arguments that run a script worker from its folder, and the environment
    /// the program needs: `python3`, `node` and `sh` from the sandbox; TypeScript on Bun, the
    /// runtime the OpenCode binary in every sandbox is built on (`BUN_BE_BUN=1`), which runs
    /// `.ts` directly. `None` for skills.
    pub fn command(&self) -> Option<Command> {
        let program = self.runtime.interpreter()?;
        if self.runtime == Runtime::Node && self.entrypoint.ends_with(".ts") {
            return Some((
                vec!["opencode".into(), self.entrypoint.clone()],
                vec![("BUN_BE_BUN", "1")],
            ));
        }
        Some((vec![program.into(), self.entrypoint.clone()], Vec::new()))
    }
}

/// A worker's name: lower-case letters, digits and `-`, starting with a letter.
pub fn is_worker_name(name: &str) -> bool {
    name.len() <= NAME_MAX
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
