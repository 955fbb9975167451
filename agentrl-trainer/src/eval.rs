//! Evaluation: greedy success rate on held-out test tasks.

use agentrl_core::{Result, SamplingParams, Split, Trajectory};
use serde::{Deserialize, Serialize};

use crate::rollout::{RolloutContext, run_many};

/// Results of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Number of test tasks played.
    pub tasks: usize,
    /// Share of tasks solved.
    pub success_rate: f64,
    /// Share of episodes that called at least one tool.
    pub tool_use_rate: f64,
    /// Invalid actions per episode.
    pub invalid_actions_per_episode: f64,
    /// Mean policy turns per episode.
    pub mean_turns: f64,
}

/// Plays test tasks `0..n` with `params` (greedy by default: [`SamplingParams::greedy`]), all
/// concurrently; returns the report and the trajectories.
pub async fn evaluate(
    ctx: &RolloutContext,
    n: usize,
    params: &SamplingParams,
) -> Result<(EvalReport, Vec<Trajectory>)> {
    let tasks: Vec<_> = (0..n as u64)
        .map(|i| (ctx.factory.task(Split::Test, i), i))
        .collect();
    let trajectories = run_many(ctx, tasks, params).await?;
    let count = trajectories.len().max(1) as f64;
    let report = EvalReport {
        tasks: trajectories.len(),
        success_rate: trajectories.iter().filter(|t| t.success).count() as f64 / count,
        tool_use_rate: trajectories.iter().filter(|t| t.tool_calls > 0).count() as f64 / count,
        invalid_actions_per_episode: trajectories
            .iter()
            .map(|t| t.invalid_actions() as f64)
            .sum::<f64>()
            / count,
        mean_turns: trajectories
            .iter()
            .map(|t| t.turns.len() as f64)
            .sum::<f64>()
            / count,
    };
    Ok((report, trajectories))
}
