//! Statistics of a set of episodes, overall and per task (env): what `metrics.jsonl` writes
//! for a training step and what an evaluation reports, so a multi-task run shows how each env
//! is doing, not only the average.

use std::collections::BTreeMap;

use agentrl_core::{Outcome, Trajectory};
use serde::{Deserialize, Serialize};

/// z-score of a two-sided 95% interval.
const Z_95: f64 = 1.959_963_984_540_054;

/// What a set of episodes (one env's, or all of them) did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeStats {
    /// Number of episodes.
    pub episodes: usize,
    /// Mean reward.
    pub reward_mean: f64,
    /// Share of successful episodes.
    pub success_rate: f64,
    /// Lower end of the 95% Wilson interval of `success_rate`.
    pub success_low: f64,
    /// Upper end of the 95% Wilson interval of `success_rate`.
    pub success_high: f64,
    /// Mean policy turns per episode.
    pub turns_mean: f64,
    /// Mean generated tokens per episode.
    pub generated_tokens_mean: f64,
    /// Mean tool calls per episode.
    pub tool_calls_per_episode: f64,
    /// Share of episodes that called at least one tool.
    pub tool_use_rate: f64,
    /// Mean invalid actions per episode.
    pub invalid_actions_per_episode: f64,
    /// Share of episodes cut short by the turn or token limit.
    pub truncated_rate: f64,
}

impl EpisodeStats {
    /// The statistics of `episodes`.
    pub fn of<'a>(episodes: impl IntoIterator<Item = &'a Trajectory>) -> Self {
        let mut s = EpisodeStats::default();
        let mut successes = 0usize;
        let mut tool_users = 0usize;
        let mut truncated = 0usize;
        for t in episodes {
            s.episodes += 1;
            s.reward_mean += t.reward;
            successes += usize::from(t.success);
            s.turns_mean += t.turns.len() as f64;
            s.generated_tokens_mean += t.num_generated() as f64;
            s.tool_calls_per_episode += f64::from(t.tool_calls);
            tool_users += usize::from(t.tool_calls > 0);
            s.invalid_actions_per_episode += t.invalid_actions() as f64;
            truncated += usize::from(t.outcome == Outcome::Truncated);
        }
        let n = s.episodes.max(1) as f64;
        s.reward_mean /= n;
        s.turns_mean /= n;
        s.generated_tokens_mean /= n;
        s.tool_calls_per_episode /= n;
        s.invalid_actions_per_episode /= n;
        s.success_rate = successes as f64 / n;
        s.tool_use_rate = tool_users as f64 / n;
        s.truncated_rate = truncated as f64 / n;
        (s.success_low, s.success_high) = wilson_interval(successes, s.episodes);
        s
    }
}

/// The statistics of `episodes` per env id, in id order.
pub fn by_task(episodes: &[Trajectory]) -> BTreeMap<String, EpisodeStats> {
    let mut groups: BTreeMap<&str, Vec<&Trajectory>> = BTreeMap::new();
    for t in episodes {
        groups.entry(t.env_id.as_str()).or_default().push(t);
    }
    groups
        .into_iter()
        .map(|(env, ts)| (env.to_string(), EpisodeStats::of(ts)))
        .collect()
}

/// The 95% Wilson score interval of `successes` out of `n` (`(0, 1)` when `n` is 0): unlike
/// the normal approximation it stays inside `[0, 1]` and is honest at 0 and `n`.
pub fn wilson_interval(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = Z_95 * Z_95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    // At 0 and n the interval touches p exactly; rounding must not move it past p.
    ((centre - half).clamp(0.0, p), (centre + half).clamp(p, 1.0))
}

/// Mean and (population) standard deviation of `values[i]` for the `i` in `indices`.
pub fn mean_std(values: &[f64], indices: &[usize]) -> (f64, f64) {
    if indices.is_empty() {
        return (0.0, 0.0);
    }
    let n = indices.len() as f64;
    let mean = indices.iter().map(|&i| values[i]).sum::<f64>() / n;
    let var = indices
        .iter()
        .map(|&i| (values[i] - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::{FinishReason, Split, Task, Turn};

    fn episode(
        env: &str,
        success: bool,
        reward: f64,
        turns: usize,
        outcome: Outcome,
    ) -> Trajectory {
        let task = Task {
            env_id: env.into(),
            id: "t".into(),
            split: Split::Train,
            data: serde_json::Value::Null,
        };
        let turn = Turn {
            injected_ids: vec![1],
            generated_ids: vec![2, 3],
            logprobs: vec![0.0, 0.0],
            policy_version: 0,
            policy_name: None,
            finish: FinishReason::Stop,
            reward: 0.0,
            stale: false,
            invalid_action: None,
        };
        Trajectory::for_task(&task, 0)
            .with_turns(vec![turn; turns])
            .with_success(success)
            .with_reward(reward)
            .with_outcome(outcome)
            .with_tool_calls(u32::from(success), 0)
    }

    #[test]
    fn per_task_stats_split_by_env_and_add_up() {
        let batch = vec![
            episode("a", true, 1.0, 2, Outcome::Completed),
            episode("a", false, 0.0, 4, Outcome::Truncated),
            episode("b", true, 0.5, 1, Outcome::Completed),
        ];
        let tasks = by_task(&batch);
        assert_eq!(tasks.keys().collect::<Vec<_>>(), ["a", "b"]);
        let a = &tasks["a"];
        assert_eq!(a.episodes, 2);
        assert_eq!(a.success_rate, 0.5);
        assert_eq!(a.reward_mean, 0.5);
        assert_eq!(a.turns_mean, 3.0);
        assert_eq!(a.generated_tokens_mean, 6.0);
        assert_eq!(a.truncated_rate, 0.5);
        assert_eq!(a.tool_use_rate, 0.5);
        let all = EpisodeStats::of(&batch);
        let total: usize = tasks.values().map(|s| s.episodes).sum();
        assert_eq!(total, all.episodes);
        let weighted: f64 = tasks
            .values()
            .map(|s| s.success_rate * s.episodes as f64)
            .sum();
        assert!((weighted / total as f64 - all.success_rate).abs() < 1e-12);
    }

    #[test]
    fn wilson_interval_matches_hand_computed_values() {
        // 8 of 10: centre (0.8 + 1.9208/10) / 1.38415 = 0.71673, half 0.22668.
        let (lo, hi) = wilson_interval(8, 10);
        assert!((lo - 0.4902).abs() < 1e-4, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-4, "{hi}");
        let (lo, hi) = wilson_interval(0, 20);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.1611).abs() < 1e-4, "{hi}");
        let (lo, hi) = wilson_interval(20, 20);
        assert!((lo - 0.8389).abs() < 1e-4, "{lo}");
        assert!((hi - 1.0).abs() < 1e-12, "{hi}");
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
    }

    #[test]
    fn mean_and_std_over_chosen_indices() {
        let v = [1.0, 10.0, 3.0, 100.0];
        assert_eq!(mean_std(&v, &[0, 2]), (2.0, 1.0));
        assert_eq!(mean_std(&v, &[]), (0.0, 0.0));
    }
}
