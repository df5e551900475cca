//! Rows read as one JSON object each, built by SQLite: the object's code then takes one value
//! across the boundary per row and parses it, instead of one crossing per column (a run has
//! 34). Hot: `opencode_get_result` and `opencode_list_runs` read runs this way.

use super::{RunRow, RUN_COLUMNS};
use crate::error::{Error, Result};
use serde::Deserialize;
use std::sync::OnceLock;

/// Arguments SQLite functions may take on Cloudflare (D1 documents 32 per function): each
/// `json_object` holds at most this many `'name', column` pairs.
const PAIRS_PER_OBJECT: usize = 16;

/// The SQL expression that turns `columns` ("a, b, c", plain column names) into one JSON
/// object with a key per column: `json_object` calls of at most [`PAIRS_PER_OBJECT`] pairs,
/// merged with `json_patch` (which leaves out a later part's NULL columns: the row types read
/// a missing key as `None`).
pub(super) fn object_of(columns: &str) -> String {
    let names: Vec<&str> = columns
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let mut parts = names.chunks(PAIRS_PER_OBJECT).map(|chunk| {
        let pairs: Vec<String> = chunk.iter().map(|c| format!("'{c}', {c}")).collect();
        format!("json_object({})", pairs.join(", "))
    });
    let first = parts.next().unwrap_or_else(|| "json_object()".to_string());
    parts.fold(first, |merged, part| {
        format!("json_patch({merged}, {part})")
    })
}

/// [`object_of`] for the run columns, built once.
pub(super) fn run_object() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| object_of(RUN_COLUMNS))
}

/// A run row as one JSON object (`json_rows`), with `get_run`'s marks beside it.
#[derive(Deserialize)]
pub(super) struct JsonRun {
    run: String,
    #[serde(default)]
    transitions_json: Option<String>,
    #[serde(default)]
    phases_json: Option<String>,
}

impl JsonRun {
    pub(super) fn decode(self) -> Result<RunRow> {
        let mut row: RunRow = serde_json::from_str(&self.run)
            .map_err(|e| Error::internal(format!("stored run: {e}")))?;
        row.transitions_json = self.transitions_json;
        row.phases_json = self.phases_json;
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_stay_within_the_argument_limit_and_name_every_column() {
        let columns: Vec<String> = (0..35).map(|i| format!("c{i}")).collect();
        let sql = object_of(&columns.join(", "));
        for part in sql.split("json_object(").skip(1) {
            let args = part
                .split(')')
                .next()
                .unwrap_or_default()
                .split(',')
                .count();
            assert!(args <= 2 * PAIRS_PER_OBJECT, "{args} arguments in {part}");
        }
        for c in &columns {
            assert!(
                sql.contains(&format!("'{c}', {c}")),
                "{c} missing from {sql}"
            );
        }
        assert_eq!(sql.matches("json_patch(").count(), 2, "{sql}");
        assert_eq!(object_of("a, b"), "json_object('a', a, 'b', b)");
    }
}
