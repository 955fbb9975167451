//! [`ExecutionCheck`]: what an [`Execution`](super::Execution) reward runs to decide.

use agentrl_core::{Error, Result, Trajectory};
use async_trait::async_trait;

/// Name of the execution reward's part, under which failing checks report their errors.
pub(crate) const PART: &str = "execution";

/// Runs a trajectory's result somewhere and reports how much of it passed.
#[async_trait]
pub trait ExecutionCheck: Send + Sync {
    /// Short description for error messages (e.g. the command line).
    fn describe(&self) -> String;

    /// The pass share of `trajectory` in `[0, 1]` (1 = everything passed). `Err` is for the
    /// checker itself failing (e.g. the program cannot be started), not for a failing answer.
    async fn check(&self, trajectory: &Trajectory) -> Result<f64>;
}

/// The error of `check` failing to run: `message`, prefixed with what it runs, as an error of
/// the execution reward.
pub(crate) fn check_failed(check: &dyn ExecutionCheck, message: String) -> Error {
    Error::Reward {
        name: PART.to_string(),
        message: format!("{}: {message}", check.describe()),
    }
}
