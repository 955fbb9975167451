//! Helpers for the xtask commands that drive `agentrl` processes (`chaos`, `bench
//! --async-io`): config files, log files, free ports and waiting for a line in a log.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Failure, Result};

/// Writes `text` to `path`; returns the path.
pub fn write(path: &Path, text: &str) -> Result<PathBuf> {
    fs::write(path, text)
        .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
    Ok(path.to_path_buf())
}

/// `path` opened for appending (created if missing), for a child's output.
pub fn log_file(path: &Path) -> Result<fs::File> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Failure::new(format!("cannot open {}: {e}", path.display())))
}

/// A free TCP port on 127.0.0.1 (the OS picks it; it stays free until someone binds it).
pub fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure::new(format!("cannot find a free port: {e}")))
}

/// How many lines of the file at `path` contain `needle` (0 when it cannot be read).
pub fn count_lines(path: &Path, needle: &str) -> usize {
    fs::read_to_string(path)
        .map(|text| text.lines().filter(|l| l.contains(needle)).count())
        .unwrap_or(0)
}

/// Polls `log` until `needle` appears on `times` lines (60 s at most), failing early once
/// `alive` says the process ended.
pub fn wait_for(
    log: &Path,
    needle: &str,
    times: usize,
    mut alive: impl FnMut() -> bool,
) -> std::result::Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if count_lines(log, needle) >= times {
            return Ok(());
        }
        if !alive() {
            return Err(format!("it exited; see {}", log.display()));
        }
        if Instant::now() > deadline {
            return Err(format!("no `{needle}` within 60 s; see {}", log.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `rl_step` records of a run's `metrics.jsonl` at `path`, in order; a line that is not
/// JSON is an error naming it.
pub fn rl_step_records(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = fs::read_to_string(path)
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Failure::new(format!("{} line {}: {e}", path.display(), i + 1)))?;
        if record["kind"] == "rl_step" {
            records.push(record);
        }
    }
    Ok(records)
}
