//! The MCP tools. Each tool is one type implementing `ToolHandler`: its parameter type (whose doc
//! comment is the tool's description and whose fields' doc comments describe the input schema),
//! its output type (the output schema), its annotations and its handler. `tool_set!` lists them
//! once for both `tools/list` and `tools/call`.

mod access;
mod catalog;
mod params;
mod run_controls;
mod runs;
mod sandbox;
mod sandbox_computer;
mod sandbox_files;
pub(crate) mod sandbox_params;
mod sandbox_secrets;
mod sandbox_tasks;
mod sandbox_templates;
mod sandbox_update;
mod sandbox_views;
#[cfg(not(target_arch = "wasm32"))]
mod schema;
mod views;
mod wait;
mod worker_params;
mod worker_runs;
mod worker_views;
mod workers;

use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::Ledger;
use crate::principal::Principal;
#[cfg(not(target_arch = "wasm32"))]
use rmcp::model::Tool;
use rmcp::model::{CallToolResult, ContentBlock, ToolAnnotations};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{Map, Value};
use worker::Env;

pub use sandbox_tasks::{exec_end, kill_exec, start_exec, EXEC_TASK_TOOL};

/// The latest word on a running call, which progress notifications carry to the client.
pub type StatusLine = std::rc::Rc<std::cell::RefCell<String>>;

/// What a tool handler may use: the caller, the ledger (bound to the caller's MCP session),
/// where links should point, and — when the client asked for progress — a status line.
pub struct Ctx<'a> {
    pub env: &'a Env,
    pub principal: Principal,
    pub ledger: Ledger,
    pub base_url: String,
    pub status: Option<StatusLine>,
    /// Set when the call is task-augmented: the task's TTL (a tool that supports tasks makes
    /// its run a task kept this long).
    pub task_ttl_ms: Option<i64>,
}

impl Ctx<'_> {
    /// Whether the client listens for progress on this call.
    pub fn wants_progress(&self) -> bool {
        self.status.is_some()
    }

    /// Replaces the status line (a no-op when the client did not ask for progress).
    pub fn report(&self, text: &str) {
        if let Some(status) = &self.status {
            status.replace(text.to_string());
        }
    }
}

/// On wasm the title, description and annotations are read from `catalog.json` (generated from
/// these natively), so the Worker's own code never reads them.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) trait ToolHandler {
    const NAME: &'static str;
    const TITLE: &'static str;
    /// Whether a call may be task-augmented (`execution.taskSupport: optional`).
    const TASKS: bool = false;
    /// The tool's description when its parameter type (shared with other tools) does not say
    /// what this one does.
    const DESCRIPTION: Option<&'static str> = None;
    type Params: DeserializeOwned + JsonSchema + 'static;
    type Output: Serialize + JsonSchema + 'static;
    fn annotations() -> ToolAnnotations;
    async fn run(ctx: &Ctx<'_>, params: Self::Params) -> Result<Self::Output>;
    /// A one-line, human-readable summary placed before the JSON in the text content.
    fn summary(output: &Self::Output) -> String;
    /// Content blocks beyond the text (e.g. an embedded file).
    fn extra_content(_output: &Self::Output) -> Vec<ContentBlock> {
        Vec::new()
    }
}

/// Why a `tools/call` did not produce a result.
#[derive(Debug)]
pub enum CallError {
    /// No tool has this name (a JSON-RPC -32602 in every protocol version).
    UnknownTool(String),
    /// The arguments do not fit the schema or the rules (field and rule in the message).
    InvalidArguments(String),
    /// The caller's MCP session is gone (HTTP 404 so the client initializes again).
    SessionGone(Error),
    /// The work could not be started (for calls that answer a task rather than a result).
    Failed(Error),
}

async fn invoke<T: ToolHandler>(
    ctx: &Ctx<'_>,
    arguments: Option<Map<String, Value>>,
) -> std::result::Result<CallToolResult, CallError> {
    let params: T::Params = parse_arguments(T::NAME, arguments)?;
    match T::run(ctx, params).await {
        Ok(output) => {
            let mut result = success(T::summary(&output), &output);
            result.content.extend(T::extra_content(&output));
            Ok(result)
        }
        Err(e) => match argument_error(T::NAME, e) {
            CallError::Failed(e) => Ok(failure(&e)),
            other => Err(other),
        },
    }
}

/// A tool's arguments as its parameter type, naming the offending field on failure.
fn parse_arguments<P: DeserializeOwned>(
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> std::result::Result<P, CallError> {
    crate::json_path::decode(arguments.unwrap_or_default()).map_err(|e| {
        let (path, mut inner) = (e.path, e.message);
        if let Some(hint) = crate::suggest::hint_for_unknown(&inner) {
            inner = format!("{inner}; {hint}");
        }
        CallError::InvalidArguments(if path == "." {
            format!("invalid arguments for {tool}: {inner}")
        } else {
            format!("invalid arguments for {tool}: `{path}`: {inner}")
        })
    })
}

/// An error of a tool's own checks as the call's error.
fn argument_error(tool: &str, e: Error) -> CallError {
    match e.kind {
        ErrorKind::InvalidInput | ErrorKind::PortClosed => {
            CallError::InvalidArguments(format!("invalid arguments for {tool}: {}", e.message))
        }
        ErrorKind::McpSessionGone => CallError::SessionGone(e),
        _ => CallError::Failed(e),
    }
}

fn success<O: Serialize>(summary: String, output: &O) -> CallToolResult {
    let structured = serde_json::to_value(output).unwrap_or(Value::Null);
    let text = format!("{summary}\n{structured}");
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result.result_type = None;
    result
}

/// A tool execution error (`isError: true`) whose text says what to do next.
fn failure(error: &Error) -> CallToolResult {
    let text = match error.kind {
        ErrorKind::Internal => format!(
            "{} — this is a temporary server problem; retry the call (with the same idempotencyKey if you used one)",
            error.message
        ),
        _ => error.message.clone(),
    };
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.result_type = None;
    result
}

/// What `opencode_get_result` (or, for a worker run, `workers_run_get`) answers for a run
/// already read: a task's result. A run that failed or was cancelled is an `isError` result (its
/// structured content says why).
pub fn run_result(ctx: &Ctx<'_>, run: crate::runs::RunRecord) -> CallToolResult {
    let ended_badly = matches!(
        run.status,
        crate::runs::RunStatus::Failed | crate::runs::RunStatus::Cancelled
    );
    if run.worker.is_some() {
        let id = run.id.clone();
        let now = crate::time::now_ms();
        if let Some(mut output) = worker_views::run_view(run.clone(), now) {
            output.web_ui_url = crate::links::run_page_url(ctx.env, &ctx.base_url, &id, now);
            for file in &mut output.outputs {
                file.download_url =
                    crate::links::output_url(ctx.env, &ctx.base_url, &id, &file.path, now);
            }
            let mut result = success(worker_runs::run_line(&output), &output);
            result.is_error = Some(ended_badly);
            return result;
        }
    }
    let output = runs::view(ctx, run);
    let mut result = success(<runs::GetResult as ToolHandler>::summary(&output), &output);
    result.is_error = Some(ended_badly);
    result
}

/// The refusal of a call to a tool that does not exist, naming the tools it may have meant.
pub fn unknown_tool_message(name: &str) -> String {
    let hint = match crate::suggest::similar(name, NAMES).as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {one:?}?)"),
        many => format!(" (did you mean one of {}?)", quoted(many)),
    };
    // A name too long to be meant is shown by its start and length, not echoed whole.
    let shown = match name.char_indices().nth(crate::suggest::LONGEST) {
        Some((end, _)) => format!("{:?}… ({} bytes)", &name[..end], name.len()),
        None => format!("{name:?}"),
    };
    format!("unknown tool {shown}{hint}; call tools/list for the available tools")
}

fn quoted(names: &[&str]) -> String {
    let names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    names.join(", ")
}

/// A tool execution error (`isError: true`) carrying `message`.
pub fn error_result(message: &str) -> CallToolResult {
    failure(&Error::invalid(message))
}

/// The tool-call error an `InvalidArguments` becomes for clients that expect tool errors.
pub fn invalid_arguments_result(message: &str) -> CallToolResult {
    failure(&Error::invalid(format!(
        "{message}. Fix the arguments and call the tool again"
    )))
}

macro_rules! tool_set {
    ($($tool:ty),+ $(,)?) => {
        /// Every tool, in the order `tools/list` shows them.
        #[cfg(not(target_arch = "wasm32"))]
        pub fn definitions() -> Vec<Tool> {
            vec![$(catalog::generated::definition::<$tool>()),+]
        }

        /// The `tools/list` result.
        pub fn list_result() -> Value {
            catalog::list()
        }

        /// Every tool's name, in the order `tools/list` shows them.
        const NAMES: &[&str] = &[$(<$tool as ToolHandler>::NAME),+];

        /// Whether the named tool takes task-augmented calls.
        pub fn supports_tasks(name: &str) -> bool {
            $(
                if name == <$tool as ToolHandler>::NAME {
                    return <$tool as ToolHandler>::TASKS;
                }
            )+
            false
        }

        /// Runs the named tool.
        pub async fn call(
            ctx: &Ctx<'_>,
            name: &str,
            arguments: Option<Map<String, Value>>,
        ) -> std::result::Result<CallToolResult, CallError> {
            $(
                if name == <$tool as ToolHandler>::NAME {
                    return invoke::<$tool>(ctx, arguments).await;
                }
            )+
            Err(CallError::UnknownTool(name.to_string()))
        }
    };
}

#[cfg(not(feature = "bundle-one-tool"))]
tool_set!(
    runs::RunTask,
    runs::GetResult,
    runs::ListRuns,
    runs::CancelRun,
    runs::ListSessions,
    wait::Wait,
    sandbox::Create,
    sandbox::List,
    sandbox::Info,
    sandbox_update::Update,
    sandbox_update::Fork,
    sandbox_templates::CreateTemplate,
    sandbox_templates::ListTemplatesTool,
    sandbox_templates::DeleteTemplateTool,
    sandbox::Exec,
    sandbox_files::FilesRead,
    sandbox_files::FilesWrite,
    sandbox_files::FilesList,
    sandbox_files::FilesDownloadDir,
    sandbox::Pause,
    sandbox::Resume,
    sandbox::Delete,
    sandbox::PreviewUrl,
    sandbox::NetworkLog,
    sandbox_computer::Computer,
    sandbox_secrets::List,
    sandbox_secrets::Attach,
    sandbox_secrets::Detach,
    workers::List,
    workers::Get,
    workers::Deploy,
    workers::Versions,
    workers::Rollback,
    workers::Delete,
    worker_runs::Run,
    worker_runs::Runs,
    worker_runs::RunGet,
    worker_runs::RunCancel,
    worker_runs::Replay,
    worker_runs::Approvals,
    worker_runs::Approve,
    worker_runs::Reject,
    workers::SecretsList,
    workers::SecretSet,
    workers::SecretDelete,
);

// Measurement only (`bench bundle-split`): the front Worker with a single tool, to weigh what
// the Worker is without its tools.
#[cfg(feature = "bundle-one-tool")]
tool_set!(runs::GetResult);
