//! Reward decided by running something: a command, a test suite, a checker in the sandbox.
//!
//! [`Execution`] asks an [`ExecutionCheck`] for the pass share of a trajectory:
//! [`CommandCheck`] runs a local command with the final answer on its standard input,
//! [`SandboxCheck`] runs its checker inside the bubblewrap sandbox of agentrl-tools.

pub mod check;
pub mod command;
pub mod sandboxed;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use agentrl_tools::sandbox::SandboxConfig;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, invalid, positive_ms};

pub use check::ExecutionCheck;
pub use command::CommandCheck;
pub use sandboxed::SandboxCheck;

/// The pass share reported by its [`ExecutionCheck`]; a share outside `[0, 1]` is an error.
#[derive(Clone)]
pub struct Execution {
    /// The checker.
    pub check: Arc<dyn ExecutionCheck>,
}

impl Execution {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = check::PART;

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

/// An `execution` reward as written in a config: a [`CommandCheck`], or with `sandbox = true`
/// a [`SandboxCheck`]; the command gets the final answer on stdin and passes with exit
/// status 0.
///
/// ```toml
/// [reward]
/// type = "execution"
/// command = ["python3", "check.py"]
/// sandbox = true
/// files = ["check.py"]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionConfig {
    /// Program and arguments (at least the program).
    pub command: Vec<String>,
    /// Time limit of one run in milliseconds (default 10 000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Run the command inside the bubblewrap sandbox, in a fresh workspace holding
    /// `answer.txt` and `files` (default false: run it directly).
    #[serde(default)]
    pub sandbox: bool,
    /// Host files copied into the sandbox workspace (only with `sandbox = true`).
    #[serde(default)]
    pub files: Vec<PathBuf>,
}

/// Time limit of one run when the config gives none: 10 s.
fn default_timeout_ms() -> u64 {
    10_000
}

impl BuildReward for ExecutionConfig {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(invalid(format!(
                "{path}.command must name a program to run, e.g. [\"python3\", \"check.py\"]"
            )));
        };
        if program.trim().is_empty() {
            return Err(invalid(format!(
                "{path}.command[0] is a blank program name"
            )));
        }
        positive_ms(path, "timeout_ms", self.timeout_ms)?;
        let timeout = Duration::from_millis(self.timeout_ms);
        if self.sandbox {
            if let Some(missing) = self.files.iter().find(|f| !f.is_file()) {
                return Err(invalid(format!(
                    "{path}.files: {} is not a file",
                    missing.display()
                )));
            }
            let mut sandbox = SandboxConfig::default();
            sandbox.limits.wall_time = timeout;
            sandbox.limits.cpu_seconds = timeout.as_secs().max(1);
            Ok(Box::new(Execution::new(SandboxCheck::new(
                self.command.clone(),
                self.files.clone(),
                sandbox,
            ))))
        } else if !self.files.is_empty() {
            Err(invalid(format!(
                "{path}.files only applies with sandbox = true"
            )))
        } else {
            Ok(Box::new(Execution::new(CommandCheck::new(
                program.clone(),
                args.to_vec(),
                timeout,
            ))))
        }
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Execution::NAME]
    }
}
