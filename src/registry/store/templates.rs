//! The templates table: one row per sandbox template, its record as JSON.

use crate::error::Result;
use crate::templates::TemplateRecord;
use serde::Deserialize;
use worker::SqlStorage;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS templates (
  name TEXT PRIMARY KEY,
  record TEXT NOT NULL
);
";

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    Ok(())
}

#[derive(Deserialize)]
struct Row {
    record: String,
}

pub fn load(sql: &SqlStorage, name: &str) -> Result<Option<TemplateRecord>> {
    let rows = sql
        .exec(
            "SELECT record FROM templates WHERE name = ?",
            vec![name.into()],
        )?
        .to_array::<Row>()?;
    match rows.into_iter().next() {
        Some(row) => Ok(Some(serde_json::from_str(&row.record)?)),
        None => Ok(None),
    }
}

/// Every template, by name.
pub fn all(sql: &SqlStorage) -> Result<Vec<TemplateRecord>> {
    let rows = sql
        .exec("SELECT record FROM templates ORDER BY name", None)?
        .to_array::<Row>()?;
    rows.iter()
        .map(|row| Ok(serde_json::from_str(&row.record)?))
        .collect()
}

pub fn save(sql: &SqlStorage, record: &TemplateRecord) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO templates (name, record) VALUES (?, ?)",
        vec![
            record.name.as_str().into(),
            serde_json::to_string(record)?.into(),
        ],
    )?;
    Ok(())
}

pub fn delete(sql: &SqlStorage, name: &str) -> Result<()> {
    sql.exec("DELETE FROM templates WHERE name = ?", vec![name.into()])?;
    Ok(())
}
