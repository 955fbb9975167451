//! Reading a Parquet task file (as Hugging Face datasets store them) row group by row group
//! with the `parquet` crate's record API; each row becomes a JSON object (lists as arrays,
//! structs as objects). A row group that fails to decode part-way is reported with the row it
//! stopped at, and reading goes on with the next group.

use std::fs::File;
use std::path::Path;

use agentrl_core::{Error, Result};
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;

use super::record::{ReadRecords, Record, RecordPlace, RowWarning};

/// Reads every row of the Parquet file at `path`; rows are counted from 0 across row groups.
pub fn read_parquet(path: &Path) -> Result<ReadRecords> {
    let file = File::open(path).map_err(|source| Error::Io {
        action: "opening task file",
        path: path.to_path_buf(),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(|e| {
        Error::Config(format!(
            "task file {}: not a readable Parquet file: {e}",
            path.display()
        ))
    })?;
    let mut read = ReadRecords::default();
    let mut first_row = 0usize;
    for group in 0..reader.num_row_groups() {
        let rows_in_group = reader.metadata().row_group(group).num_rows();
        let rows_in_group = usize::try_from(rows_in_group).unwrap_or(0);
        read_row_group(&reader, group, first_row, rows_in_group, &mut read);
        first_row += rows_in_group;
    }
    Ok(read)
}

/// Appends the rows of row group `group` (whose first row is `first_row`) to `read`.
fn read_row_group(
    reader: &SerializedFileReader<File>,
    group: usize,
    first_row: usize,
    rows_in_group: usize,
    read: &mut ReadRecords,
) {
    let skip_group = |read: &mut ReadRecords, at: usize, why: String| {
        read.skipped.push(RowWarning {
            place: RecordPlace::Row(at),
            reason: format!(
                "{why}; skipped rows {at}..{} of row group {group}",
                first_row + rows_in_group
            ),
        });
    };
    let group_reader = match reader.get_row_group(group) {
        Ok(group_reader) => group_reader,
        Err(e) => return skip_group(read, first_row, format!("cannot decode: {e}")),
    };
    let rows = match group_reader.get_row_iter(None) {
        Ok(rows) => rows,
        Err(e) => return skip_group(read, first_row, format!("cannot decode: {e}")),
    };
    for (offset, row) in rows.enumerate() {
        let place = RecordPlace::Row(first_row + offset);
        match row.map(|r| r.to_json_value()) {
            Ok(Value::Object(columns)) => read.records.push(Record { place, columns }),
            Ok(_) => read.skipped.push(RowWarning {
                place,
                reason: "not a record of columns".into(),
            }),
            Err(e) => {
                return skip_group(read, first_row + offset, format!("cannot decode: {e}"));
            }
        }
    }
}
