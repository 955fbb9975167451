//! `agentrl reward`: re-scores saved trajectories offline with a run's `[reward]` tree, so
//! rewards can be designed before compute is spent on training.
//!
//! Output: one JSON line per trajectory, `{"task_id", "group_id", "total", "parts"}`. Broken
//! input lines and trajectories whose reward fails are reported (with the line number or the
//! trajectory's position) and skipped; everything else is still scored.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrl_core::{BadLine, Error, Result, RewardFn, Trajectory, read_jsonl};
use agentrl_policy::{ChatFormat, TinyChatFormat};
use agentrl_reward::{LlmJudge, RewardContext, apply};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::config::RunConfig;
use crate::judge::{DEFAULT_JUDGE_MAX_NEW_TOKENS, PolicyJudge, tch_judge};

/// Trajectories scored at once (judge calls are further limited by the judge itself).
const IN_FLIGHT: usize = 64;

/// What `agentrl reward` was asked to do (its command-line arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct RescoreArgs {
    /// Run config (TOML) whose `[reward]` tree is used.
    #[arg(long)]
    pub config: PathBuf,
    /// Trajectories to score (JSONL).
    #[arg(long)]
    pub trajectories: PathBuf,
    /// Output file (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Weights of the run's model shape for an llm_judge in the reward tree.
    #[arg(long)]
    pub judge_checkpoint: Option<PathBuf>,
}

/// One output line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredLine {
    /// Task id of the trajectory.
    pub task_id: String,
    /// Its group id.
    pub group_id: u64,
    /// The reward total.
    pub total: f64,
    /// The named breakdown.
    pub parts: BTreeMap<String, f64>,
}

/// What a re-scoring run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RescoreReport {
    /// Trajectories scored and written.
    pub scored: usize,
    /// Mean total over the scored trajectories (0 when none).
    pub mean_total: f64,
    /// Input lines that were not trajectories.
    pub bad_lines: Vec<BadLine>,
    /// Trajectories whose reward failed: `(position among the good trajectories, 1-based;
    /// task id; error)`.
    pub failed: Vec<(usize, String, String)>,
    /// Trajectories an `llm_judge` scored with its fallback.
    pub judge_fallbacks: usize,
}

impl std::fmt::Display for RescoreReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scored {} trajectories, mean total {:.4}; {} bad lines; {} failed",
            self.scored,
            self.mean_total,
            self.bad_lines.len(),
            self.failed.len()
        )?;
        if self.judge_fallbacks > 0 {
            write!(f, "; judge fallback used {} times", self.judge_fallbacks)?;
        }
        Ok(())
    }
}

/// The whole `agentrl reward` command: loads the config and the trajectories, builds the
/// reward (with a judge when the tree has one), writes the scores to `--out` or stdout, and
/// reports bad lines, failures and the summary on `diag`.
pub async fn run_rescore(args: &RescoreArgs, diag: &mut dyn Write) -> Result<RescoreReport> {
    let config = RunConfig::load(&args.config)?;
    let (reward, judge) = build_reward(&config, args.judge_checkpoint.as_deref())?;
    let report = match &args.out {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| Error::io("creating", path, e))?;
            let mut out = std::io::BufWriter::new(file);
            let report = rescore_file(reward, &args.trajectories, &mut out, diag).await?;
            out.flush().map_err(|e| Error::io("writing", path, e))?;
            report
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let report = rescore_file(reward, &args.trajectories, &mut out, diag).await?;
            out.flush()
                .map_err(|e| Error::io("writing", "standard output", e))?;
            report
        }
    };
    if let Some(judge) = judge
        && judge.prompts_too_long() > 0
    {
        note(
            diag,
            &format!(
                "warning: {} judge prompts did not fit the judge model's context ({} tokens) \
                 and got the fallback; lower max_transcript_chars in the llm_judge",
                judge.prompts_too_long(),
                config.model.max_seq_len
            ),
        );
    }
    note(diag, &report.to_string());
    Ok(report)
}

/// A built reward, with the judge backend it asks when its tree has an `llm_judge`.
pub type BuiltReward = (Arc<dyn RewardFn>, Option<Arc<PolicyJudge>>);

/// The run's reward; when its tree has an `llm_judge`, a judge over the run's model shape
/// loaded from `judge_checkpoint` (which is then required).
pub fn build_reward(config: &RunConfig, judge_checkpoint: Option<&Path>) -> Result<BuiltReward> {
    if !config.reward.needs_judge() {
        return Ok((Arc::from(config.reward.build()?), None));
    }
    let Some(checkpoint) = judge_checkpoint else {
        return Err(Error::Config(
            "the [reward] tree has an llm_judge: set `judge_checkpoint` in the run config \
             (or pass --judge-checkpoint FILE to `agentrl reward`): safetensors weights of the \
             run's [model] shape to grade with"
                .into(),
        ));
    };
    if !checkpoint.exists() {
        return Err(Error::Config(format!(
            "judge checkpoint {} does not exist",
            checkpoint.display()
        )));
    }
    agentrl_policy::set_torch_threads(config.torch_threads);
    let format: Arc<dyn ChatFormat> = Arc::new(TinyChatFormat::new());
    let judge = Arc::new(tch_judge(
        &config.model,
        format,
        checkpoint,
        config.seed,
        DEFAULT_JUDGE_MAX_NEW_TOKENS,
    )?);
    let reward = config
        .reward
        .build_with(&RewardContext::with_judge(judge.clone()))?;
    Ok((Arc::from(reward), Some(judge)))
}

/// Scores every trajectory of the JSONL file `input` with `reward`, writing one line per
/// scored trajectory to `out` (in input order) and each problem to `diag`.
pub async fn rescore_file(
    reward: Arc<dyn RewardFn>,
    input: &Path,
    out: &mut dyn Write,
    diag: &mut dyn Write,
) -> Result<RescoreReport> {
    let (trajectories, bad_lines) = read_jsonl(input)?;
    for bad in &bad_lines {
        note(
            diag,
            &format!("skipping line {}: {}", bad.line, bad.message),
        );
    }
    let mut report = RescoreReport {
        bad_lines,
        ..RescoreReport::default()
    };
    let mut sum = 0.0;
    let mut pending = trajectories.into_iter().enumerate();
    loop {
        let chunk: Vec<(usize, Trajectory)> = pending.by_ref().take(IN_FLIGHT).collect();
        if chunk.is_empty() {
            break;
        }
        for (index, scored) in score_chunk(&reward, chunk).await? {
            match scored {
                Ok(line) => {
                    serde_json::to_writer(&mut *out, &line)
                        .map_err(|e| Error::json("a scored trajectory", e))?;
                    out.write_all(b"\n")
                        .map_err(|e| Error::io("writing", "the scores", e))?;
                    sum += line.total;
                    report.scored += 1;
                    if line.parts.get(LlmJudge::FALLBACK_PART) == Some(&1.0) {
                        report.judge_fallbacks += 1;
                    }
                }
                Err((task_id, message)) => {
                    note(
                        diag,
                        &format!("trajectory {} (task {task_id}): {message}", index + 1),
                    );
                    report.failed.push((index + 1, task_id, message));
                }
            }
        }
    }
    if report.scored > 0 {
        report.mean_total = sum / report.scored as f64;
    }
    Ok(report)
}

type Scored = std::result::Result<ScoredLine, (String, String)>;

/// Scores a chunk concurrently; the results come back in input order.
async fn score_chunk(
    reward: &Arc<dyn RewardFn>,
    chunk: Vec<(usize, Trajectory)>,
) -> Result<Vec<(usize, Scored)>> {
    let mut set = JoinSet::new();
    for (index, mut trajectory) in chunk {
        let reward = reward.clone();
        set.spawn(async move {
            let scored = match apply(reward.as_ref(), &mut trajectory).await {
                Ok(()) => Ok(ScoredLine {
                    task_id: trajectory.task_id,
                    group_id: trajectory.group_id,
                    total: trajectory.reward,
                    parts: trajectory.reward_parts,
                }),
                Err(e) => Err((trajectory.task_id, e.to_string())),
            };
            (index, scored)
        });
    }
    let mut results = Vec::with_capacity(set.len());
    while let Some(joined) = set.join_next().await {
        results.push(joined.map_err(|e| Error::Trainer(format!("a scoring task stopped: {e}")))?);
    }
    results.sort_by_key(|(index, _)| *index);
    Ok(results)
}

/// Writes a line to the diagnostics stream; a closed stream is not worth failing the run for.
fn note(diag: &mut dyn Write, line: &str) {
    let _ = writeln!(diag, "{line}");
}
