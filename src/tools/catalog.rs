//! The `tools/list` result. Its schemas are generated from the tools' Rust types (schemars, doc
//! comments) natively, and the Worker serves the same JSON from `catalog.json`, written by
//! `cargo xtask build` before it builds the wasm: the schema generator and every type's schema
//! code stay out of the bundle (76 KB gzipped), and no isolate spends its first `tools/list`
//! generating them. Every build whose sources changed writes it first, so the Worker always
//! serves what the types say; the unit test (run alone, as `cargo test` does) fails when the
//! committed file lags behind them.

use serde_json::Value;

/// The `tools/list` result (`mcp::server::tools_list` keeps it encoded, once per isolate and era,
/// so it is not kept decoded as well).
pub fn list() -> Value {
    load()
}

#[cfg(target_arch = "wasm32")]
fn load() -> Value {
    serde_json::from_str(include_str!("catalog.json")).unwrap_or_else(|e| {
        worker::console_error!("src/tools/catalog.json does not parse: {e}");
        serde_json::json!({ "tools": [] })
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn load() -> Value {
    generated::list()
}

#[cfg(not(target_arch = "wasm32"))]
pub(super) mod generated {
    use super::super::{definitions, schema, supports_tasks, ToolHandler};
    use rmcp::handler::server::tool::{schema_for_input, schema_for_type};
    use rmcp::model::{Tool, ToolAnnotations};
    use serde_json::{Map, Value};

    /// The `tools/list` result as the tools' types describe them.
    pub fn list() -> Value {
        let tools: Vec<Value> = definitions()
            .into_iter()
            .map(|tool| {
                let tasks = supports_tasks(&tool.name);
                let mut value = serde_json::json!(tool);
                if tasks {
                    value["execution"] = serde_json::json!({"taskSupport": "optional"});
                }
                value
            })
            .collect();
        serde_json::json!({ "tools": tools })
    }

    /// `catalog.json`'s text: compact JSON, one tool per line (a change shows as the lines of
    /// the tools it touches). Indented, the file was 344 KB in the bundle (27 KB gzipped); as
    /// it is, 180 KB (19 KB).
    #[cfg(test)]
    pub fn text() -> String {
        let list = list();
        let lines: Vec<String> = list["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
        format!("{{\"tools\":[\n{}\n]}}\n", lines.join(",\n"))
    }

    pub fn definition<T: ToolHandler>() -> Tool {
        let description = match T::DESCRIPTION {
            Some(text) => text.to_string(),
            None => schema_for_type::<T::Params>()
                .get("description")
                .and_then(Value::as_str)
                .map(schema::unwrap_lines)
                .unwrap_or_default(),
        };
        let input = schema_for_input::<T::Params>()
            .unwrap_or_else(|e| panic!("input schema of {}: {e}", T::NAME));
        let mut tool = Tool::new(T::NAME, description, input)
            .with_title(T::TITLE)
            .with_output_schema::<T::Output>()
            .annotate(T::annotations().with_title_opt(T::TITLE));
        let input = std::sync::Arc::make_mut(&mut tool.input_schema);
        schema::tidy(input);
        // A tool without parameters still lists its (empty) properties: some clients require
        // them.
        input
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(output) = tool.output_schema.as_mut() {
            schema::tidy(std::sync::Arc::make_mut(output));
        }
        tool
    }

    trait AnnotationsExt {
        fn with_title_opt(self, title: &str) -> Self;
    }

    impl AnnotationsExt for ToolAnnotations {
        fn with_title_opt(mut self, title: &str) -> Self {
            self.title = Some(title.to_string());
            self
        }
    }
}

#[cfg(test)]
mod tests {
    /// `catalog.json` is what the types generate; with `HANDOFF_WRITE_CATALOG=1` (what
    /// `cargo xtask build` sets) the test writes it instead.
    #[test]
    fn catalog_json_is_what_the_types_generate() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools/catalog.json");
        let generated = super::generated::text();
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        if stored == generated {
            return;
        }
        if std::env::var("HANDOFF_WRITE_CATALOG").as_deref() == Ok("1") {
            std::fs::write(&path, generated).expect("write src/tools/catalog.json");
            return;
        }
        panic!("src/tools/catalog.json is out of date: `cargo xtask build` writes it (commit it)");
    }
}
