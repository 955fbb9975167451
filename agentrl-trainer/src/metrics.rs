//! `metrics.jsonl`: one JSON object per line, flushed as written.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};

/// Appends metric records to a JSONL file.
pub struct MetricsWriter {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl MetricsWriter {
    /// Opens (appending) `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io("opening", path, e))?;
        Ok(MetricsWriter {
            path: path.to_path_buf(),
            out: std::io::BufWriter::new(file),
        })
    }

    /// Writes one record and flushes it.
    pub fn write(&mut self, record: &serde_json::Value) -> Result<()> {
        serde_json::to_writer(&mut self.out, record)
            .map_err(|e| Error::json(format!("metrics record for {}", self.path.display()), e))?;
        self.out
            .write_all(b"\n")
            .and_then(|_| self.out.flush())
            .map_err(|e| Error::io("writing", &self.path, e))
    }
}

/// Reads all records of a metrics file, skipping lines that are not JSON objects.
pub fn read_metrics(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading", path, e))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.is_object())
        .collect())
}
