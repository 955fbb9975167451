//! `status.json` in a run directory: whether the run is running, finished or failed, which
//! process runs it and since when. The `sft`, `train` and `demo` commands write it (see
//! [`track`]); `agentrl dashboard` reads it ([`RunStatus::read`]) to show a badge per run.
//!
//! The file is replaced atomically (a temporary file in the same directory, then a rename), so
//! a reader never sees half a document.

use std::future::Future;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Name of the status file inside a run directory.
pub const STATUS_FILE: &str = "status.json";

/// What the run's process last said about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// The process started and has not ended yet (or died without saying so).
    Running,
    /// The command returned successfully.
    Finished,
    /// The command returned an error.
    Failed,
}

/// The contents of `status.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    /// Running, finished or failed.
    pub state: RunState,
    /// Process id of the `agentrl` process that runs (or ran) the command.
    pub pid: u32,
    /// When the command started, in seconds since the Unix epoch.
    pub started_unix: u64,
    /// Which command: `sft`, `train` or `demo`.
    pub command: String,
    /// When the command ended, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix: Option<u64>,
    /// The error the command returned, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunStatus {
    /// The status of a command that starts now in this process.
    pub fn running(command: &str) -> Self {
        RunStatus {
            state: RunState::Running,
            pid: std::process::id(),
            started_unix: unix_now(),
            command: command.to_string(),
            ended_unix: None,
            error: None,
        }
    }

    /// This status after the command returned `result`.
    pub fn ended<T>(&self, result: &Result<T>) -> Self {
        let (state, error) = match result {
            Ok(_) => (RunState::Finished, None),
            Err(e) => (RunState::Failed, Some(e.to_string())),
        };
        RunStatus {
            state,
            ended_unix: Some(unix_now()),
            error,
            ..self.clone()
        }
    }

    /// Reads `status.json` of `run_dir`; `Ok(None)` when there is none.
    pub fn read(run_dir: &Path) -> Result<Option<Self>> {
        let path = run_dir.join(STATUS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("reading", &path, e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::json(path.display().to_string(), e))
    }

    /// Writes this status to `run_dir/status.json` atomically, creating `run_dir` if needed.
    pub fn write(&self, run_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(run_dir).map_err(|e| Error::io("creating", run_dir, e))?;
        let path = run_dir.join(STATUS_FILE);
        let temp = run_dir.join(format!(".{STATUS_FILE}.{}.tmp", std::process::id()));
        let text =
            serde_json::to_string_pretty(self).map_err(|e| Error::json("the run status", e))?;
        std::fs::write(&temp, text + "\n").map_err(|e| Error::io("writing", &temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io("replacing", &path, e))
    }
}

/// Runs `command_future` (the body of the command `command` on `run_dir`) between a
/// `running` and a `finished`/`failed` status. A status that cannot be written is a warning,
/// never the command's failure.
pub async fn track<T>(
    run_dir: &Path,
    command: &str,
    command_future: impl Future<Output = Result<T>>,
) -> Result<T> {
    let status = RunStatus::running(command);
    write_or_warn(&status, run_dir);
    let result = command_future.await;
    write_or_warn(&status.ended(&result), run_dir);
    result
}

/// Writes `status`, logging a warning when it cannot.
fn write_or_warn(status: &RunStatus, run_dir: &Path) {
    if let Err(e) = status.write(run_dir) {
        tracing::warn!("cannot record the run status: {e}");
    }
}

/// Whether process `pid` is alive: `/proc/PID` exists on Linux; elsewhere assumed alive.
pub fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Seconds since the Unix epoch (0 when the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn track_records_running_then_finished_or_failed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = dir.path().join("run");
        let seen = track(&run, "train", async {
            let during = RunStatus::read(&run)?.expect("status while running");
            Ok(during)
        })
        .await
        .expect("command ok");
        assert_eq!(seen.state, RunState::Running);
        assert_eq!(seen.pid, std::process::id());
        assert_eq!(seen.command, "train");
        let after = RunStatus::read(&run).expect("read").expect("status");
        assert_eq!(after.state, RunState::Finished);

        let failed: Result<()> =
            track(&run, "demo", async { Err(Error::Trainer("boom".into())) }).await;
        assert!(failed.is_err());
        let after = RunStatus::read(&run).expect("read").expect("status");
        assert_eq!(after.state, RunState::Failed);
        assert_eq!(after.error.as_deref(), Some("trainer: boom"));
        assert!(process_alive(std::process::id()));
    }
}
