//! Reading `worker.yml` and checking it in full against its folder: every problem is reported
//! with its field, so one deploy attempt shows everything to fix.

use super::fields::{describe, is_media_type, Fields, Problem};
use super::files::FileSet;
use super::inputs::{self, InputKind, InputSpec};
use super::manifest::*;
use super::schedule::{self, Schedule};
use super::{yaml, Runtime, MANIFEST_FILE, SCHEMA_VERSION};
use handoff_wire::rules;
use serde_json::Value;

/// What deploy checks depend on that is not in the folder.
pub struct Rules {
    pub now_ms: i64,
    /// Shortest interval a schedule may fire at.
    pub min_schedule_s: u64,
}

/// Reads and checks a worker folder's `worker.yml` against the folder; every problem at once.
pub fn read(files: &FileSet, rules: &Rules) -> Result<Manifest, Vec<Problem>> {
    let mut problems = files.problems();
    let Some(bytes) = files.get(MANIFEST_FILE) else {
        problems.push(Problem::new(
            MANIFEST_FILE,
            "the folder has no worker.yml; add one (README: worker.yml)",
        ));
        return Err(problems);
    };
    let value = std::str::from_utf8(bytes)
        .map_err(|_| "is not UTF-8 text".to_string())
        .and_then(yaml::parse);
    let value = match value {
        Ok(v) => v,
        Err(why) => {
            problems.push(Problem::new(MANIFEST_FILE, why));
            return Err(problems);
        }
    };
    let manifest = from_value(&value, rules, &mut problems);
    if let Some(m) = &manifest {
        check_folder(m, files, &mut problems);
    }
    match manifest {
        Some(m) if problems.is_empty() => Ok(m),
        _ => Err(problems),
    }
}

/// Problems as one message naming every field.
pub fn problems_message(problems: &[Problem]) -> String {
    format!(
        "the worker folder has {} problem(s):\n{}",
        problems.len(),
        describe(problems)
    )
}

fn from_value(value: &Value, rules: &Rules, p: &mut Vec<Problem>) -> Option<Manifest> {
    let f = Fields::new(value, "", p)?;
    f.only(
        &[
            "schema_version",
            "name",
            "title",
            "description",
            "entrypoint",
            "runtime",
            "inputs",
            "outputs",
            "triggers",
            "secrets",
            "network",
            "limits",
            "tools",
            "model",
            "approvals",
        ],
        p,
    );
    match f.get("schema_version").map(Value::as_u64) {
        Some(Some(SCHEMA_VERSION)) => {}
        None => p.push(Problem::new(
            "schema_version",
            "is required (schema_version: 1)",
        )),
        Some(_) => p.push(Problem::new(
            "schema_version",
            format!("this handoff reads schema_version {SCHEMA_VERSION}"),
        )),
    }
    let name = required(f.string("name", NAME_MAX, p), &f, "name", p);
    if let Some(n) = &name {
        if !is_worker_name(n) {
            p.push(Problem::new(
                "name",
                format!("{n:?}: use lower-case letters, digits and '-', starting with a letter"),
            ));
        }
    }
    let runtime = required(f.string("runtime", 20, p), &f, "runtime", p).and_then(|r| {
        r.parse::<Runtime>().ok().or_else(|| {
            p.push(Problem::new(
                "runtime",
                format!("{r:?} is not a runtime; use python3, node, sh or skill"),
            ));
            None
        })
    });
    let inputs = inputs::read_specs(f.get("inputs"), p);
    let outputs = read_outputs(&f, p);
    let triggers = read_triggers(&f, &inputs, rules, p);
    let secrets = f.strings("secrets", MAX_SECRETS, rules::ENV_NAME_MAX, p);
    for (i, s) in secrets.iter().enumerate() {
        if !rules::is_env_name(s) || s.starts_with("HANDOFF_") {
            p.push(Problem::new(
                format!("secrets[{i}]"),
                format!("{s:?} is not a secret name: use letters, digits and '_' (not HANDOFF_…)"),
            ));
        }
    }
    let network = match f.map("network", p) {
        Some(n) => {
            n.only(&["allow"], p);
            Network {
                allow: network_rules(&n, "allow", p),
            }
        }
        None => Network::default(),
    };
    let limits = read_limits(&f, p);
    let approvals = read_approvals(&f, p);
    let model = f.string("model", 200, p);
    if model.as_deref().is_some_and(|m| !m.contains('/')) {
        p.push(Problem::new(
            "model",
            "must be provider/model, e.g. anthropic/claude-sonnet-4-5",
        ));
    }
    let runtime = runtime?;
    let tools = read_tools(&f, runtime, p);
    if runtime != Runtime::Skill {
        for field in ["tools", "model"] {
            if f.get(field).is_some() {
                p.push(Problem::new(field, "applies only to runtime: skill"));
            }
        }
    }
    let entrypoint = f
        .string("entrypoint", 200, p)
        .unwrap_or_else(|| runtime.default_entrypoint().to_string());
    Some(Manifest {
        schema_version: SCHEMA_VERSION,
        title: f.string("title", 100, p).or_else(|| name.clone())?,
        name: name?,
        description: f.string("description", 2000, p).unwrap_or_default(),
        runtime,
        entrypoint,
        inputs,
        outputs,
        triggers: triggers?,
        secrets,
        network,
        limits,
        tools,
        model,
        approvals,
    })
}

fn required<T>(value: Option<T>, f: &Fields<'_>, key: &str, p: &mut Vec<Problem>) -> Option<T> {
    if value.is_none() && f.get(key).is_none() {
        p.push(Problem::new(f.field(key), "is required"));
    }
    value
}

fn network_rules(f: &Fields<'_>, key: &str, p: &mut Vec<Problem>) -> Vec<String> {
    let list = f.strings(key, MAX_RULES, rules::HOST_MAX + 6, p);
    for (i, rule) in list.iter().enumerate() {
        if !rules::is_network_rule(rule) {
            p.push(Problem::new(
                format!("{}[{i}]", f.field(key)),
                format!("{rule:?} is not a rule; use host, *.domain, host:port or *"),
            ));
        }
    }
    list
}

fn read_outputs(f: &Fields<'_>, p: &mut Vec<Problem>) -> Outputs {
    let Some(o) = f.map("outputs", p) else {
        return Outputs::default();
    };
    o.only(&["files", "result"], p);
    let mut files = Vec::new();
    if let Some(list) = o.get("files") {
        match list.as_array() {
            Some(items) if items.len() <= MAX_OUTPUT_FILES => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("outputs.files[{i}]");
                    if let Some(spec) = read_output(item, &path, p) {
                        files.push(spec);
                    }
                }
            }
            Some(_) => p.push(Problem::new(
                "outputs.files",
                format!("at most {MAX_OUTPUT_FILES} output files"),
            )),
            None => p.push(Problem::new("outputs.files", "must be a list")),
        }
    }
    let result_schema = o.map("result", p).and_then(|r| {
        r.only(&["schema"], p);
        let schema = r.get("schema")?;
        let size = schema.to_string().len();
        if size > RESULT_SCHEMA_MAX {
            p.push(Problem::new(
                "outputs.result.schema",
                "is larger than 16 KiB",
            ));
        } else if let Err(why) = super::result_schema::check_schema(schema) {
            p.push(Problem::new("outputs.result.schema", why));
        }
        Some(schema.clone())
    });
    Outputs {
        files,
        result_schema,
    }
}

fn read_output(item: &Value, path: &str, p: &mut Vec<Problem>) -> Option<OutputSpec> {
    let f = Fields::new(item, path, p)?;
    f.only(&["path", "media_type", "description", "required"], p);
    let file = required(f.string("path", 200, p), &f, "path", p)?;
    if let Err(why) = super::files::check_path(&file) {
        p.push(Problem::new(format!("{path}.path"), why));
    }
    let media_type = f
        .string("media_type", 200, p)
        .unwrap_or_else(|| "application/octet-stream".into());
    if !is_media_type(&media_type) {
        p.push(Problem::new(
            format!("{path}.media_type"),
            format!("{media_type:?} is not a media type such as text/csv"),
        ));
    }
    Some(OutputSpec {
        path: file,
        media_type,
        description: f.string("description", 500, p),
        required: f.boolean("required", p).unwrap_or(false),
    })
}

fn read_triggers(
    f: &Fields<'_>,
    inputs: &[InputSpec],
    rules: &Rules,
    p: &mut Vec<Problem>,
) -> Option<Triggers> {
    let Some(t) = f.map("triggers", p) else {
        return Some(Triggers {
            manual: true,
            schedule: None,
            webhook: false,
        });
    };
    t.only(&["manual", "schedule", "webhook"], p);
    let schedule = t.map("schedule", p).and_then(|s| {
        s.only(&["cron", "timezone", "inputs"], p);
        let cron = required(s.string("cron", 200, p), &s, "cron", p)?;
        let timezone = s.string("timezone", 100, p).unwrap_or_else(|| "UTC".into());
        if let Err(why) = schedule::check(&cron, &timezone, rules.now_ms, rules.min_schedule_s) {
            p.push(Problem::new("triggers.schedule", why));
        }
        let given = s
            .get("inputs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if s.get("inputs").is_some_and(|v| !v.is_object()) {
            p.push(Problem::new(
                "triggers.schedule.inputs",
                "must be a map of input values",
            ));
        }
        // A scheduled run has nobody to ask: its inputs must be complete now.
        if let Err(problems) = inputs::check_values(inputs, &given, &[]) {
            for problem in problems {
                p.push(Problem::new(
                    format!("triggers.schedule.{}", problem.field),
                    format!(
                        "{} (scheduled runs need a value here or a default)",
                        problem.message
                    ),
                ));
            }
        }
        if inputs
            .iter()
            .any(|i| i.kind == InputKind::File && i.required)
        {
            p.push(Problem::new(
                "triggers.schedule",
                "a scheduled worker cannot have required file inputs",
            ));
        }
        Some(Schedule {
            cron,
            timezone,
            inputs: given,
        })
    });
    Some(Triggers {
        manual: t.boolean("manual", p).unwrap_or(true),
        schedule,
        webhook: t.boolean("webhook", p).unwrap_or(false),
    })
}

fn read_limits(f: &Fields<'_>, p: &mut Vec<Problem>) -> Limits {
    let defaults = Limits {
        timeout_seconds: TIMEOUT_DEFAULT_S,
        max_tool_iterations: ITERATIONS_DEFAULT,
        max_tokens: TOKENS_DEFAULT,
    };
    let Some(l) = f.map("limits", p) else {
        return defaults;
    };
    l.only(&["timeout", "max_tool_iterations", "max_tokens"], p);
    Limits {
        timeout_seconds: l
            .seconds("timeout", 1, TIMEOUT_MAX_S, p)
            .unwrap_or(defaults.timeout_seconds),
        max_tool_iterations: l
            .uint("max_tool_iterations", 1, ITERATIONS_MAX, p)
            .unwrap_or(defaults.max_tool_iterations),
        max_tokens: l
            .uint("max_tokens", 1000, TOKENS_MAX, p)
            .unwrap_or(defaults.max_tokens),
    }
}

fn read_approvals(f: &Fields<'_>, p: &mut Vec<Problem>) -> Approvals {
    let Some(a) = f.map("approvals", p) else {
        return Approvals::default();
    };
    a.only(&["required", "label", "allow_before"], p);
    Approvals {
        required: a.boolean("required", p).unwrap_or(false),
        label: a
            .string("label", 100, p)
            .unwrap_or_else(|| "Approve this run".into()),
        allow_before: network_rules(&a, "allow_before", p),
    }
}

fn read_tools(f: &Fields<'_>, runtime: Runtime, p: &mut Vec<Problem>) -> Vec<String> {
    if f.get("tools").is_none() {
        return match runtime {
            Runtime::Skill => DEFAULT_AGENT_TOOLS.iter().map(|s| s.to_string()).collect(),
            _ => Vec::new(),
        };
    }
    let tools = f.strings("tools", AGENT_TOOLS.len(), 20, p);
    for (i, tool) in tools.iter().enumerate() {
        if !AGENT_TOOLS.contains(&tool.as_str()) {
            p.push(Problem::new(
                format!("tools[{i}]"),
                format!(
                    "{tool:?} is not a tool; choose from {}",
                    AGENT_TOOLS.join(", ")
                ),
            ));
        }
    }
    tools
}

/// Problems between the manifest and the files beside it.
fn check_folder(m: &Manifest, files: &FileSet, p: &mut Vec<Problem>) {
    if let Err(why) = super::files::check_path(&m.entrypoint) {
        p.push(Problem::new("entrypoint", why));
    } else if files.get(&m.entrypoint).is_none() {
        p.push(Problem::new(
            "entrypoint",
            format!("{:?} is not in the folder", m.entrypoint),
        ));
    } else if m.runtime == Runtime::Skill && files.text(&m.entrypoint).is_none() {
        p.push(Problem::new("entrypoint", "a skill must be UTF-8 text"));
    }
    let script_ok = match m.runtime {
        Runtime::Python3 => m.entrypoint.ends_with(".py"),
        Runtime::Node => [".js", ".mjs", ".cjs", ".ts"]
            .iter()
            .any(|e| m.entrypoint.ends_with(e)),
        Runtime::Sh => m.entrypoint.ends_with(".sh"),
        Runtime::Skill => m.entrypoint.ends_with(".md"),
    };
    if !script_ok {
        p.push(Problem::new(
            "entrypoint",
            format!(
                "{:?} does not look like a {} entrypoint ({})",
                m.entrypoint,
                m.runtime.as_str(),
                m.runtime.default_entrypoint()
            ),
        ));
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
