//! The records read from a task file: where each sits ([`RecordPlace`]), its columns
//! ([`Record`]), the rows skipped ([`RowWarning`]) and both together ([`ReadRecords`]). Shared by
//! the JSONL reader (`source`) and the Parquet reader (`parquet_file`).

use std::fmt;

use serde_json::Value;

/// Where a record sits in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPlace {
    /// A JSONL line, counted from 1.
    Line(usize),
    /// A Parquet row, counted from 0.
    Row(usize),
}

impl fmt::Display for RecordPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordPlace::Line(n) => write!(f, "line {n}"),
            RecordPlace::Row(n) => write!(f, "row {n}"),
        }
    }
}

/// One record of a task file: its place and its columns as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Where it is in the file.
    pub place: RecordPlace,
    /// Column name to value.
    pub columns: serde_json::Map<String, Value>,
}

/// A row that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowWarning {
    /// Where the row is in its file.
    pub place: RecordPlace,
    /// Why it was skipped (names the column when one is at fault).
    pub reason: String,
}

impl fmt::Display for RowWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.reason)
    }
}

/// The records of a file and the rows that could not be read.
#[derive(Debug, Default)]
pub struct ReadRecords {
    /// Readable records, in file order.
    pub records: Vec<Record>,
    /// Rows that could not be read, in file order.
    pub skipped: Vec<RowWarning>,
}
