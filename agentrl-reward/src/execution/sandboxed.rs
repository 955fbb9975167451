//! [`SandboxCheck`]: an [`ExecutionCheck`] that runs its checker inside agentrl-tools' bubblewrap
//! sandbox (no network, read-only system, CPU/memory/time limits), in a fresh workspace holding
//! the final answer and the checker's own files.

use std::path::PathBuf;
use std::sync::Arc;

use agentrl_core::{Error, Result, Trajectory};
use agentrl_tools::sandbox::{Sandbox, SandboxConfig};
use async_trait::async_trait;

use super::check::{ExecutionCheck, check_failed};

/// Name of the file that holds the final answer in the checker's workspace.
pub const ANSWER_FILE: &str = "answer.txt";

/// Runs `argv` in the sandbox with the final answer on stdin and in [`ANSWER_FILE`], after
/// copying `files` (host paths, by file name) into the workspace. Exit status 0 passes (1.0);
/// anything else — a failure, a signal, a time-out — fails (0.0). A trajectory without a final
/// answer fails without running anything. A sandbox that cannot be built is an error: the
/// checker never runs unsandboxed.
#[derive(Debug, Clone)]
pub struct SandboxCheck {
    /// Program and arguments, run inside the sandbox (working directory: the workspace).
    pub argv: Vec<String>,
    /// Host files copied into the workspace before each run (e.g. the checker script).
    pub files: Vec<PathBuf>,
    sandbox: Arc<Sandbox>,
}

impl SandboxCheck {
    /// A check running `argv` in a sandbox built from `config`, with `files` copied in.
    pub fn new(argv: Vec<String>, files: Vec<PathBuf>, config: SandboxConfig) -> Self {
        SandboxCheck {
            argv,
            files,
            sandbox: Arc::new(Sandbox::new(config)),
        }
    }

    fn error(&self, message: String) -> Error {
        check_failed(self, message)
    }

    /// A fresh workspace with the answer and the checker's files (file system work, so it
    /// runs on the blocking pool).
    async fn workspace(&self, answer: &str) -> Result<tempfile::TempDir> {
        let (answer, files) = (answer.to_string(), self.files.clone());
        let made = tokio::task::spawn_blocking(move || -> std::result::Result<_, String> {
            let dir = tempfile::tempdir().map_err(|e| format!("cannot make a workspace: {e}"))?;
            std::fs::write(dir.path().join(ANSWER_FILE), answer)
                .map_err(|e| format!("cannot write {ANSWER_FILE}: {e}"))?;
            for file in &files {
                let name = file
                    .file_name()
                    .ok_or_else(|| format!("{} names no file", file.display()))?;
                std::fs::copy(file, dir.path().join(name))
                    .map_err(|e| format!("cannot copy {}: {e}", file.display()))?;
            }
            Ok(dir)
        })
        .await
        .map_err(|e| self.error(format!("the workspace task failed: {e}")))?;
        made.map_err(|e| self.error(e))
    }
}

#[async_trait]
impl ExecutionCheck for SandboxCheck {
    fn describe(&self) -> String {
        format!("sandboxed command `{}`", self.argv.join(" "))
    }

    async fn check(&self, trajectory: &Trajectory) -> Result<f64> {
        let Some(answer) = trajectory.final_answer() else {
            return Ok(0.0);
        };
        let workspace = self.workspace(answer).await?;
        let output = self
            .sandbox
            .run(
                workspace.path(),
                &self.argv,
                Some(answer.as_bytes().to_vec()),
            )
            .await
            .map_err(|e| self.error(e.to_string()))?;
        Ok(if output.success() { 1.0 } else { 0.0 })
    }
}
