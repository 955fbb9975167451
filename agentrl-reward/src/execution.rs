//! Reward decided by running something: a command, a test suite, later the sandbox.
//!
//! [`Execution`] asks an [`ExecutionCheck`] for the pass share of a trajectory. The one
//! implementation here, [`CommandCheck`], runs a local command with the final answer on its
//! standard input. The bubblewrap sandbox will plug in here as another [`ExecutionCheck`].

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Runs a trajectory's result somewhere and reports how much of it passed.
#[async_trait]
pub trait ExecutionCheck: Send + Sync {
    /// Short description for error messages (e.g. the command line).
    fn describe(&self) -> String;

    /// The pass share of `trajectory` in `[0, 1]` (1 = everything passed). `Err` is for the
    /// checker itself failing (e.g. the program cannot be started), not for a failing answer.
    async fn check(&self, trajectory: &Trajectory) -> Result<f64>;
}

/// The pass share reported by its [`ExecutionCheck`]; a share outside `[0, 1]` is an error.
#[derive(Clone)]
pub struct Execution {
    /// The checker.
    pub check: Arc<dyn ExecutionCheck>,
}

impl Execution {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "execution";

    /// A reward over `check`.
    pub fn new(check: impl ExecutionCheck + 'static) -> Self {
        Execution {
            check: Arc::new(check),
        }
    }
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("check", &self.check.describe())
            .finish()
    }
}

#[async_trait]
impl RewardFn for Execution {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let share = self.check.check(trajectory).await?;
        if !(0.0..=1.0).contains(&share) {
            return Err(Error::Reward {
                name: Self::NAME.to_string(),
                message: format!(
                    "{} reported a pass share of {share} for task `{}`; it must be in [0, 1]",
                    self.check.describe(),
                    trajectory.task_id
                ),
            });
        }
        Ok(RewardBreakdown::single(Self::NAME, share))
    }
}

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
        Error::Reward {
            name: Execution::NAME.to_string(),
            message: format!("{}: {message}", self.describe()),
        }
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
