//! [`CommandCheck`]: an [`ExecutionCheck`] that runs a local command on the final answer.

use std::process::Stdio;
use std::time::Duration;

use agentrl_core::{Error, Result, Trajectory};
use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::check::{ExecutionCheck, check_failed};

/// Runs `program args...` as a subprocess with the trajectory's final answer on stdin; exit
/// status 0 passes (1.0), anything else fails (0.0).
///
/// A trajectory without a final answer fails without running anything. A run longer than
/// `timeout` fails and its process is killed (only that process: a command that starts
/// others should run them in its own process group and clean them up). The variables `AGENTRL_ENV_ID` and `AGENTRL_TASK_ID` tell
/// the command which task it checks. A program that cannot be started is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandCheck {
    /// Program to run (looked up in `PATH` when it has no slash).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How long one run may take.
    pub timeout: Duration,
}

impl CommandCheck {
    /// A check running `program` with `args` under `timeout`.
    pub fn new(program: impl Into<String>, args: Vec<String>, timeout: Duration) -> Self {
        CommandCheck {
            program: program.into(),
            args,
            timeout,
        }
    }

    fn error(&self, message: String) -> Error {
        check_failed(self, message)
    }

    async fn run(&self, answer: &str, trajectory: &Trajectory) -> Result<bool> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .env("AGENTRL_ENV_ID", &trajectory.env_id)
            .env("AGENTRL_TASK_ID", &trajectory.task_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.error(format!("could not start: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A command that exits without reading its input closes the pipe: not an error.
            match stdin.write_all(answer.as_bytes()).await {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(self.error(format!("writing the answer to stdin: {e}")));
                }
                _ => {}
            }
        }
        let status = child
            .wait()
            .await
            .map_err(|e| self.error(format!("waiting for the command: {e}")))?;
        Ok(status.success())
    }
}

#[async_trait]
impl ExecutionCheck for CommandCheck {
    fn describe(&self) -> String {
        let mut line = self.program.clone();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        format!("command `{line}`")
    }

    async fn check(&self, trajectory: &Trajectory) -> Result<f64> {
        let Some(answer) = trajectory.final_answer() else {
            return Ok(0.0);
        };
        match tokio::time::timeout(self.timeout, self.run(answer, trajectory)).await {
            Ok(passed) => Ok(if passed? { 1.0 } else { 0.0 }),
            // The child is killed when the timed-out future drops it.
            Err(_) => Ok(0.0),
        }
    }
}
