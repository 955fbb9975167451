//! Reward decided by running something: a command, a test suite, a checker in the sandbox.
//!
//! [`Execution`] asks an [`ExecutionCheck`] for the pass share of a trajectory:
//! [`CommandCheck`] runs a local command with the final answer on its standard input,
//! [`SandboxCheck`] runs its checker inside the bubblewrap sandbox of agentrl-tools.

pub mod check;
pub mod command;
pub mod sandboxed;

use std::sync::Arc;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

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
