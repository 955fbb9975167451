//! `metrics.jsonl`: one JSON object per line, flushed as written (and, with
//! `[logging] tensorboard = true`, also as TensorBoard scalars: see [`crate::tensorboard`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};

use crate::tensorboard::EventWriter;

/// Appends metric records to a JSONL file (and optionally to a TensorBoard event file).
pub struct MetricsWriter {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    tensorboard: Option<EventWriter>,
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
            tensorboard: None,
        })
    }

    /// Opens (appending) `path`, and with `tb_dir` also writes every record as TensorBoard
    /// scalars to this process's event file in `tb_dir` (created when missing).
    pub fn open_with_tensorboard(path: &Path, tb_dir: Option<&Path>) -> Result<Self> {
        let mut writer = Self::open(path)?;
        writer.tensorboard = tb_dir.map(EventWriter::open).transpose()?;
        Ok(writer)
    }

    /// The TensorBoard event file records also go to, if any.
    pub fn tensorboard_file(&self) -> Option<&Path> {
        self.tensorboard.as_ref().map(EventWriter::path)
    }

    /// How long the metrics file and the TensorBoard event file (when there is one) are now:
    /// what a checkpoint records, so a resumed run can cut later records away.
    pub fn position(&mut self) -> Result<(u64, Option<crate::resume::EventFilePosition>)> {
        self.out
            .flush()
            .map_err(|e| Error::io("writing", &self.path, e))?;
        let bytes = std::fs::metadata(&self.path)
            .map_err(|e| Error::io("reading the size of", &self.path, e))?
            .len();
        let tensorboard = match &self.tensorboard {
            Some(tb) => {
                let path = tb.path();
                let len = std::fs::metadata(path)
                    .map_err(|e| Error::io("reading the size of", path, e))?
                    .len();
                path.file_name().map(|n| crate::resume::EventFilePosition {
                    file: n.to_string_lossy().into_owned(),
                    bytes: len,
                })
            }
            None => None,
        };
        Ok((bytes, tensorboard))
    }

    /// Writes one record and flushes it (to the event file too, when there is one).
    pub fn write(&mut self, record: &serde_json::Value) -> Result<()> {
        serde_json::to_writer(&mut self.out, record)
            .map_err(|e| Error::json(format!("metrics record for {}", self.path.display()), e))?;
        self.out
            .write_all(b"\n")
            .and_then(|_| self.out.flush())
            .map_err(|e| Error::io("writing", &self.path, e))?;
        match &mut self.tensorboard {
            Some(tb) => tb.write_record(record),
            None => Ok(()),
        }
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
