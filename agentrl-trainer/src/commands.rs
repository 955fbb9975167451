//! The training subcommands of the `agentrl` binary as library functions: their arguments
//! (clap) and what each does. `main.rs` only parses the command line and calls these.
//!
//! ```no_run
//! use agentrl_trainer::commands::{DemoArgs, demo};
//!
//! # async fn go() -> agentrl_core::Result<()> {
//! let args = DemoArgs {
//!     config: "configs/demo.toml".into(),
//!     run_dir: "runs/demo".into(),
//!     fresh: true,
//!     seed: None,
//! };
//! demo(&args).await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use clap::Args;

use crate::config::RunConfig;
use crate::rescore::{RescoreArgs, run_rescore};
use crate::run::Run;

/// `agentrl sft`: behaviour cloning from demonstrations.
#[derive(Args, Debug, Clone)]
pub struct SftArgs {
    /// Run config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Run directory.
    #[arg(long)]
    pub run_dir: PathBuf,
    /// Demonstration trajectories (JSONL) to use instead of generating them.
    #[arg(long)]
    pub demos: Option<PathBuf>,
}

/// `agentrl train`: RL with the async pipeline.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Run config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Run directory.
    #[arg(long)]
    pub run_dir: PathBuf,
    /// Initial weights (default: the run's SFT checkpoint when present, else random).
    #[arg(long)]
    pub init: Option<PathBuf>,
}

/// `agentrl eval`: held-out success of a checkpoint.
#[derive(Args, Debug, Clone)]
pub struct EvalArgs {
    /// Run config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Weights to evaluate (safetensors).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Run directory for the metrics record.
    #[arg(long, default_value = "runs/eval")]
    pub run_dir: PathBuf,
    /// Number of test tasks per env (default: the config's).
    #[arg(long)]
    pub tasks: Option<usize>,
    /// Episodes per task, for pass@k (default: the config's `[eval] samples`, 1).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Sampling temperature (default: the config's `[eval] temperature`, greedy).
    #[arg(long)]
    pub temperature: Option<f32>,
}

/// `agentrl demo`: SFT, evaluation, RL, evaluation.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Run config (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Run directory.
    #[arg(long)]
    pub run_dir: PathBuf,
    /// Delete the run directory first (it must look like a run: hold metrics.jsonl or be empty).
    #[arg(long)]
    pub fresh: bool,
    /// Seed of the run (default: the config's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Writes demonstrations (unless given) and runs SFT; prints where the checkpoint went.
pub async fn sft(args: &SftArgs) -> Result<()> {
    let run = Run::new(RunConfig::load(&args.config)?, &args.run_dir)?;
    let demos = match &args.demos {
        Some(d) => {
            existing(d, "demonstrations file")?;
            d.clone()
        }
        None => run.write_demonstrations().await?,
    };
    run.sft(&demos)?;
    println!(
        "SFT done: {}",
        args.run_dir.join("checkpoints/sft.safetensors").display()
    );
    Ok(())
}

/// Trains from the run's latest checkpoint (or `--init`, or the SFT checkpoint, or random
/// weights), evaluates and plots.
pub async fn train(args: &TrainArgs) -> Result<()> {
    let run = Run::new(RunConfig::load(&args.config)?, &args.run_dir)?;
    let (learner, start) = match run.latest_checkpoint()? {
        Some((step, file)) => {
            println!("resuming from {} (step {step})", file.display());
            (run.learner(run.config.rl.lr, Some(&file))?, step)
        }
        None => {
            let sft = args.run_dir.join("checkpoints/sft.safetensors");
            let init = args.init.clone().or_else(|| sft.exists().then_some(sft));
            if let Some(i) = &init {
                existing(i, "initial checkpoint")?;
            }
            (run.learner(run.config.rl.lr, init.as_deref())?, 0)
        }
    };
    let (learner, summary) = run.rl(learner, start).await?;
    let report = run
        .evaluate(&learner, "after_rl", start + summary.steps)
        .await?;
    run.plot()?;
    println!(
        "trained {} steps; held-out success {:.3} on {} tasks",
        summary.steps, report.success_rate, report.tasks
    );
    Ok(())
}

/// Evaluates a checkpoint and prints the report as JSON.
pub async fn eval(args: &EvalArgs) -> Result<()> {
    existing(&args.checkpoint, "checkpoint")?;
    let mut cfg = RunConfig::load(&args.config)?;
    if let Some(n) = args.tasks {
        cfg.eval.tasks = n;
    }
    if let Some(k) = args.samples {
        cfg.eval.samples = k;
    }
    if let Some(t) = args.temperature {
        cfg.eval.sampling.temperature = t;
    }
    cfg.validate()
        .map_err(|e| Error::Config(format!("eval options: {e}")))?;
    let run = Run::new(cfg, &args.run_dir)?;
    let learner = run.learner(run.config.rl.lr, Some(&args.checkpoint))?;
    let report = run.evaluate(&learner, "eval", 0).await?;
    println!("{}", report.markdown_table());
    println!(
        "{}",
        serde_json::to_string_pretty(&report).map_err(|e| Error::json("report", e))?
    );
    Ok(())
}

/// Runs the whole demo and prints its headline.
pub async fn demo(args: &DemoArgs) -> Result<()> {
    if args.fresh {
        remove_previous_run(&args.run_dir)?;
    }
    let mut config = RunConfig::load(&args.config)?;
    if let Some(seed) = args.seed {
        config.seed = seed;
    }
    let summary = crate::run::demo(config, &args.run_dir).await?;
    println!(
        "held-out success: {:.3} after SFT -> {:.3} after {} RL steps ({} tasks); {:.0} s",
        summary.eval_success_before_rl,
        summary.eval_success_after_rl,
        summary.rl_steps,
        summary.eval_tasks,
        summary.wall_seconds
    );
    if summary.per_task.len() > 1 {
        for (env, change) in &summary.per_task {
            println!(
                "  {env}: {:.3} -> {:.3} ({:+.3})",
                change.before_rl, change.after_rl, change.change
            );
        }
    }
    println!("summary: {}", args.run_dir.join("summary.json").display());
    Ok(())
}

/// Re-scores the trajectories; scores go to `--out` or stdout, problems to stderr.
pub async fn reward(args: &RescoreArgs) -> Result<()> {
    existing(&args.trajectories, "trajectories file")?;
    run_rescore(args, &mut std::io::stderr()).await?;
    Ok(())
}

/// An error naming `what` when `path` does not exist.
fn existing(path: &Path, what: &str) -> Result<()> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "{what} {} does not exist",
            path.display()
        )))
    }
}

/// Removes a previous run directory, refusing folders that do not look like runs.
fn remove_previous_run(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let is_run = dir.join("metrics.jsonl").exists() || dir.join("config.toml").exists();
    let is_empty = std::fs::read_dir(dir)
        .map_err(|e| Error::io("reading", dir, e))?
        .next()
        .is_none();
    if !is_run && !is_empty {
        return Err(Error::Config(format!(
            "--fresh refuses to delete {}: it does not look like a run directory",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io("removing", dir, e))
}
