//! Evaluation: greedy success on held-out test tasks, overall and per task (env) with 95%
//! Wilson intervals.

use std::collections::BTreeMap;

use agentrl_core::{Result, RewardFn, SamplingParams, Task, Trajectory};
use serde::{Deserialize, Serialize};

use crate::rollout::{RolloutContext, run_many_with_progress};
use crate::task_stats::{EpisodeStats, by_task};

/// Results of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Number of test tasks played.
    pub tasks: usize,
    /// Share of tasks solved.
    pub success_rate: f64,
    /// Lower end of the 95% Wilson interval of `success_rate`.
    pub success_low: f64,
    /// Upper end of the 95% Wilson interval of `success_rate`.
    pub success_high: f64,
    /// Share of episodes that called at least one tool.
    pub tool_use_rate: f64,
    /// Invalid actions per episode.
    pub invalid_actions_per_episode: f64,
    /// Mean policy turns per episode.
    pub mean_turns: f64,
    /// The same figures (and more) for each env, by env id.
    pub per_task: BTreeMap<String, EpisodeStats>,
    /// pass@k when each task was played k > 1 times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_k: Option<PassAtK>,
    /// Whether the episodes were scored by the run's reward; when not (a judge or a stateful
    /// reward), every `reward_mean` of the report is 0 and means nothing.
    #[serde(default)]
    pub reward_scored: bool,
}

/// pass@k: the share of tasks solved by at least one of their k episodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassAtK {
    /// Episodes per task.
    pub k: usize,
    /// Over all tasks.
    pub overall: f64,
    /// Per env id.
    pub per_task: BTreeMap<String, f64>,
}

impl PassAtK {
    /// pass@k of `episodes`, grouped by `(env, task id)`; `None` unless every task has the
    /// same number k > 1 of episodes.
    pub fn of(episodes: &[Trajectory]) -> Option<Self> {
        let mut tasks: BTreeMap<(&str, &str), (usize, bool)> = BTreeMap::new();
        for t in episodes {
            let entry = tasks.entry((&t.env_id, &t.task_id)).or_default();
            entry.0 += 1;
            entry.1 |= t.success;
        }
        let k = tasks.values().next()?.0;
        if k < 2 || tasks.values().any(|(n, _)| *n != k) {
            return None;
        }
        let mut per_env: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for ((env, _), (_, solved)) in &tasks {
            let e = per_env.entry(env.to_string()).or_default();
            e.0 += usize::from(*solved);
            e.1 += 1;
        }
        let solved: usize = per_env.values().map(|(s, _)| s).sum();
        Some(PassAtK {
            k,
            overall: solved as f64 / tasks.len() as f64,
            per_task: per_env
                .into_iter()
                .map(|(env, (s, n))| (env, s as f64 / n as f64))
                .collect(),
        })
    }
}

impl EvalReport {
    /// The report on `episodes`.
    pub fn of(episodes: &[Trajectory]) -> Self {
        let all = EpisodeStats::of(episodes);
        EvalReport {
            tasks: all.episodes,
            success_rate: all.success_rate,
            success_low: all.success_low,
            success_high: all.success_high,
            tool_use_rate: all.tool_use_rate,
            invalid_actions_per_episode: all.invalid_actions_per_episode,
            mean_turns: all.turns_mean,
            per_task: by_task(episodes),
            pass_at_k: PassAtK::of(episodes),
            reward_scored: false,
        }
    }

    /// The report as a Markdown table: one row per env, then the total.
    pub fn markdown_table(&self) -> String {
        let pass = self.pass_at_k.as_ref();
        let mut out = String::from(
            "| env | tasks | success | 95% interval | turns | tokens | invalid actions |",
        );
        if let Some(p) = pass {
            out.push_str(&format!(" pass@{} |", p.k));
        }
        out.push_str("\n|---|---:|---:|---|---:|---:|---:|");
        if pass.is_some() {
            out.push_str("---:|");
        }
        out.push('\n');
        let row = |name: &str, s: &EpisodeStats, pass: Option<f64>| {
            let mut line = format!(
                "| {name} | {} | {:.3} | {:.3}-{:.3} | {:.2} | {:.1} | {:.2} |",
                s.episodes,
                s.success_rate,
                s.success_low,
                s.success_high,
                s.turns_mean,
                s.generated_tokens_mean,
                s.invalid_actions_per_episode
            );
            if let Some(p) = pass {
                line.push_str(&format!(" {p:.3} |"));
            }
            line.push('\n');
            line
        };
        for (env, s) in &self.per_task {
            out.push_str(&row(
                env,
                s,
                pass.and_then(|p| p.per_task.get(env).copied()),
            ));
        }
        if self.per_task.len() > 1 {
            let all = EpisodeStats {
                episodes: self.tasks,
                success_rate: self.success_rate,
                success_low: self.success_low,
                success_high: self.success_high,
                turns_mean: self.mean_turns,
                invalid_actions_per_episode: self.invalid_actions_per_episode,
                generated_tokens_mean: self
                    .per_task
                    .values()
                    .map(|s| s.generated_tokens_mean * s.episodes as f64)
                    .sum::<f64>()
                    / self.tasks.max(1) as f64,
                ..EpisodeStats::default()
            };
            out.push_str(&row("**all**", &all, pass.map(|p| p.overall)));
        }
        out
    }

    /// One line per env: `id: success (low-high) on n`.
    pub fn per_task_lines(&self) -> Vec<String> {
        self.per_task
            .iter()
            .map(|(env, s)| {
                format!(
                    "{env}: success {:.3} (95% {:.3}-{:.3}) on {} tasks, {:.2} turns, {:.2} invalid actions",
                    s.success_rate,
                    s.success_low,
                    s.success_high,
                    s.episodes,
                    s.turns_mean,
                    s.invalid_actions_per_episode
                )
            })
            .collect()
    }
}

/// Saves an evaluation under `run_dir`: the episodes to `samples/eval_{label}.jsonl` and the
/// report, as an `eval` record of `label` at `step`, through `metrics`.
pub fn save_evaluation(
    run_dir: &std::path::Path,
    label: &str,
    step: usize,
    report: &EvalReport,
    episodes: &[Trajectory],
    metrics: &mut crate::metrics::MetricsWriter,
) -> Result<()> {
    let samples = run_dir.join("samples");
    std::fs::create_dir_all(&samples)
        .map_err(|e| agentrl_core::Error::io("creating", &samples, e))?;
    agentrl_core::write_jsonl(
        &samples.join(format!("eval_{label}.jsonl")),
        episodes,
        false,
    )?;
    let mut record = serde_json::to_value(report)
        .map_err(|e| agentrl_core::Error::json("evaluation report", e))?;
    record["kind"] = serde_json::json!("eval");
    record["label"] = serde_json::json!(label);
    record["step"] = serde_json::json!(step);
    metrics.write(&record)
}

/// Plays `tasks` (each with its group id) with `params` (greedy by default:
/// [`SamplingParams::greedy`]), all concurrently, and scores the episodes with `reward` when
/// there is one (see `score_episodes`); returns the report and the trajectories.
pub async fn evaluate(
    ctx: &RolloutContext,
    tasks: Vec<(Task, u64)>,
    params: &SamplingParams,
    reward: Option<&dyn RewardFn>,
) -> Result<(EvalReport, Vec<Trajectory>)> {
    let progress = crate::progress::phase("eval", tasks.len() as u64);
    let mut trajectories = run_many_with_progress(ctx, tasks, params, &progress).await?;
    let scored = match reward {
        Some(reward) => score_episodes(reward, &mut trajectories).await,
        None => false,
    };
    let report = EvalReport {
        reward_scored: scored,
        ..EvalReport::of(&trajectories)
    };
    progress.set_message(format!("success {:.3}", report.success_rate));
    progress.finish();
    Ok((report, trajectories))
}

/// Scores `episodes` with `reward`; returns whether they were scored. A reward that fails on
/// an episode leaves them all unscored (reward 0, no parts), with a warning: an evaluation's
/// success figures and episodes are kept either way.
async fn score_episodes(reward: &dyn RewardFn, episodes: &mut [Trajectory]) -> bool {
    for i in 0..episodes.len() {
        if let Err(e) = agentrl_reward::apply(reward, &mut episodes[i]).await {
            tracing::warn!(
                "the evaluation is left unscored: the reward of task {} ({}) failed: {e}",
                episodes[i].task_id,
                episodes[i].env_id
            );
            for scored in &mut episodes[..i] {
                scored.reward = 0.0;
                scored.reward_parts.clear();
            }
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::Split;

    fn episode(env: &str, task: &str, success: bool) -> Trajectory {
        let task = Task {
            env_id: env.into(),
            id: task.into(),
            split: Split::Test,
            data: serde_json::Value::Null,
        };
        Trajectory::for_task(&task, 0).with_success(success)
    }

    #[test]
    fn pass_at_k_counts_tasks_solved_by_any_sample() {
        let episodes = vec![
            episode("a", "1", false),
            episode("a", "1", true),
            episode("a", "2", false),
            episode("a", "2", false),
            episode("b", "1", true),
            episode("b", "1", true),
        ];
        let pass = PassAtK::of(&episodes).unwrap();
        assert_eq!(pass.k, 2);
        assert!((pass.overall - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(pass.per_task["a"], 0.5);
        assert_eq!(pass.per_task["b"], 1.0);
        // One sample per task, or uneven counts: no pass@k.
        assert_eq!(PassAtK::of(&episodes[..1]), None);
        assert_eq!(PassAtK::of(&episodes[..3]), None);

        let report = EvalReport::of(&episodes);
        assert_eq!(report.tasks, 6);
        assert!((report.success_rate - 0.5).abs() < 1e-12);
        let table = report.markdown_table();
        assert!(table.contains("| env | tasks | success"), "{table}");
        assert!(table.contains("pass@2"), "{table}");
        assert!(table.contains("| a | 4 | 0.250 |"), "{table}");
        assert!(table.contains("| b | 2 | 1.000 |"), "{table}");
        assert!(table.contains("| **all** | 6 | 0.500 |"), "{table}");
    }
}
