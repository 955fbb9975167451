//! Reading a task file into JSON records, one per row: JSONL (one object a line) here,
//! Parquet in `parquet_file`. A record that cannot be read becomes a [`RowWarning`] naming its
//! line (JSONL, counted from 1) or row (Parquet, counted from 0 as dataframes do); only a file
//! that cannot be read at all is an error.

use std::path::Path;

use agentrl_core::{Error, Result};
use serde_json::Value;

pub use super::record::{ReadRecords, Record, RecordPlace, RowWarning};

/// The kinds of task file, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Jsonl,
    Parquet,
}

/// The kind of `path` by its extension; others are an [`Error::Config`] naming the file.
fn file_kind(path: &Path) -> Result<FileKind> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("jsonl" | "ndjson") => Ok(FileKind::Jsonl),
        Some("parquet") => Ok(FileKind::Parquet),
        _ => Err(Error::Config(format!(
            "task file {}: unknown format (use .jsonl or .parquet)",
            path.display()
        ))),
    }
}

/// Reads every record of the task file at `path` (`.jsonl` or `.parquet`).
pub fn read_records(path: &Path) -> Result<ReadRecords> {
    match file_kind(path)? {
        FileKind::Jsonl => read_jsonl(path),
        FileKind::Parquet => read_parquet(path),
    }
}

/// The records of a JSONL file; blank lines are skipped silently.
fn read_jsonl(path: &Path) -> Result<ReadRecords> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        action: "reading task file",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(parse_jsonl(&text))
}

/// The records of JSONL `text`.
pub fn parse_jsonl(text: &str) -> ReadRecords {
    let mut read = ReadRecords::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let place = RecordPlace::Line(i + 1);
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(columns)) => read.records.push(Record { place, columns }),
            Ok(other) => read.skipped.push(RowWarning {
                place,
                reason: format!("not a JSON object but {}", json_kind(&other)),
            }),
            Err(e) => read.skipped.push(RowWarning {
                place,
                reason: format!("invalid JSON: {e}"),
            }),
        }
    }
    read
}

/// What kind of JSON value `value` is, for messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(feature = "dataset-parquet")]
fn read_parquet(path: &Path) -> Result<ReadRecords> {
    super::parquet_file::read_parquet(path)
}

#[cfg(not(feature = "dataset-parquet"))]
fn read_parquet(path: &Path) -> Result<ReadRecords> {
    Err(Error::Config(format!(
        "task file {}: reading Parquet needs agentrl-env's `dataset-parquet` feature",
        path.display()
    )))
}
