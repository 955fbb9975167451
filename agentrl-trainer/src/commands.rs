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
//!     sft_from: None,
//! };
//! demo(&args).await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrl_core::SamplingParams;
use agentrl_core::{Error, Result};
use agentrl_env::EnvFactory;
use agentrl_policy::http::{HttpPolicy, HttpPolicyConfig};
use clap::Args;

use crate::agent_eval::{Agent, SuiteOptions, evaluate_agent};
use crate::config::RunConfig;
use crate::eval::EvalReport;
use crate::rescore::{RescoreArgs, run_rescore};
use crate::run::Run;
use crate::run_status;

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

/// `agentrl train`: RL with the async pipeline. In a run directory that holds a checkpoint,
/// it resumes from the newest complete one.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Run config (TOML; default with --resume: the run directory's `config.toml`).
    #[arg(long, required_unless_present = "resume")]
    pub config: Option<PathBuf>,
    /// Run directory.
    #[arg(long, required_unless_present = "resume", conflicts_with = "resume")]
    pub run_dir: Option<PathBuf>,
    /// Resume the run in RUN_DIR from its newest complete checkpoint (an error when it has
    /// none).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "init")]
    pub resume: Option<PathBuf>,
    /// Initial weights (default: the run's SFT checkpoint when present, else random).
    #[arg(long)]
    pub init: Option<PathBuf>,
}

impl TrainArgs {
    /// The run directory: `--run-dir` or `--resume`'s.
    pub fn run_dir(&self) -> &Path {
        self.resume
            .as_deref()
            .or(self.run_dir.as_deref())
            .unwrap_or(Path::new("."))
    }

    /// The config file: `--config`, or with `--resume` the run directory's copy.
    pub fn config(&self) -> PathBuf {
        match (&self.config, &self.resume) {
            (Some(config), _) => config.clone(),
            (None, Some(dir)) => dir.join("config.toml"),
            (None, None) => PathBuf::from("config.toml"),
        }
    }
}

/// `agentrl eval`: held-out success of a checkpoint (`--config` and `--checkpoint`), of any
/// OpenAI-compatible chat endpoint (`--endpoint` and `--model`), or of the envs' reference
/// solvers (`--reference`).
#[derive(Args, Debug, Clone)]
pub struct EvalArgs {
    /// Run config (TOML): the envs and evaluation settings (required with --checkpoint).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Weights to evaluate (safetensors).
    #[arg(long, conflicts_with_all = ["endpoint", "reference"])]
    pub checkpoint: Option<PathBuf>,
    /// An OpenAI-compatible server (e.g. `http://127.0.0.1:8000/v1`) whose model plays the
    /// envs through chat completions with native tools.
    #[arg(long, requires = "model", conflicts_with = "reference")]
    pub endpoint: Option<String>,
    /// The model name to ask the endpoint for.
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable that holds the endpoint's API key (sent as a bearer token).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Play each env with its reference solver.
    #[arg(long)]
    pub reference: bool,
    /// Envs for --endpoint and --reference: `all` (every registered env) or a comma-separated
    /// list of ids (default: the config's envs).
    #[arg(long)]
    pub suite: Option<String>,
    /// Episodes in flight at once (--endpoint and --reference).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Most tokens per endpoint answer.
    #[arg(long, default_value_t = 1024)]
    pub max_tokens: usize,
    /// Run directory for the metrics record and the episodes.
    #[arg(long, default_value = "runs/eval")]
    pub run_dir: PathBuf,
    /// Number of test tasks per env (default: the config's, or 20 without one).
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
    /// Start from these SFT weights (an earlier run's `checkpoints/sft.safetensors`) instead
    /// of writing demonstrations and running SFT.
    #[arg(long, value_name = "FILE")]
    pub sft_from: Option<PathBuf>,
}

/// Writes demonstrations (unless given) and runs SFT; prints where the checkpoint went.
/// The run's `status.json` says running, then finished or failed.
pub async fn sft(args: &SftArgs) -> Result<()> {
    run_status::track(&args.run_dir, "sft", sft_steps(args)).await
}

/// The body of [`sft`].
async fn sft_steps(args: &SftArgs) -> Result<()> {
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
/// weights), evaluates and plots. The run's `status.json` says running, then finished or failed.
pub async fn train(args: &TrainArgs) -> Result<()> {
    run_status::track(args.run_dir(), "train", train_steps(args)).await
}

/// The body of [`train`].
async fn train_steps(args: &TrainArgs) -> Result<()> {
    let run_dir = args.run_dir();
    let config = args.config();
    existing(&config, "run config")?;
    let run = Run::new(RunConfig::load(&config)?, run_dir)?;
    let (learner, summary, start) = match run.resume_point()? {
        Some(point) => {
            let start = point.state.step;
            println!(
                "resuming from {} (step {start})",
                point.dir.as_ref().unwrap_or(&point.model).display()
            );
            let learner = run.resumed_learner(&point)?;
            let (learner, summary) = run.rl_resumed(learner, point).await?;
            (learner, summary, start)
        }
        None if args.resume.is_some() => {
            return Err(Error::Config(format!(
                "--resume: {} holds no complete checkpoint to resume from",
                run_dir.display()
            )));
        }
        None => {
            let sft = run_dir.join("checkpoints/sft.safetensors");
            let init = args.init.clone().or_else(|| sft.exists().then_some(sft));
            if let Some(i) = &init {
                existing(i, "initial checkpoint")?;
            }
            let learner = run.learner(run.config.rl.lr, init.as_deref())?;
            let (learner, summary) = run.rl(learner, 0).await?;
            (learner, summary, 0)
        }
    };
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

/// Evaluates a checkpoint, an endpoint or the reference solvers; prints the report as a
/// Markdown table, then as JSON.
pub async fn eval(args: &EvalArgs) -> Result<()> {
    let report = match (&args.checkpoint, &args.endpoint, args.reference) {
        (Some(checkpoint), None, false) => eval_checkpoint(args, checkpoint).await?,
        (None, Some(endpoint), false) => {
            let agent = endpoint_agent(args, endpoint)?;
            eval_agent(args, &agent, "endpoint").await?
        }
        (None, None, true) => eval_agent(args, &Agent::Reference, "reference").await?,
        _ => {
            return Err(Error::Config(
                "say what to evaluate: --checkpoint FILE (with --config), --endpoint URL \
                 --model NAME, or --reference"
                    .into(),
            ));
        }
    };
    println!("{}", report.markdown_table());
    println!(
        "{}",
        serde_json::to_string_pretty(&report).map_err(|e| Error::json("report", e))?
    );
    Ok(())
}

/// `--checkpoint`: the run config's envs played by our policy with those weights.
async fn eval_checkpoint(args: &EvalArgs, checkpoint: &Path) -> Result<EvalReport> {
    existing(checkpoint, "checkpoint")?;
    let Some(config) = &args.config else {
        return Err(Error::Config(
            "--checkpoint needs --config (the model shape and the envs)".into(),
        ));
    };
    let mut cfg = RunConfig::load(config)?;
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
    let learner = run.learner(run.config.rl.lr, Some(checkpoint))?;
    run.evaluate(&learner, "eval", 0).await
}

/// The endpoint client of `--endpoint`, `--model` and `--api-key-env`.
fn endpoint_agent(args: &EvalArgs, endpoint: &str) -> Result<Agent> {
    let model = args.model.clone().unwrap_or_default();
    let mut config = HttpPolicyConfig::new(endpoint, model);
    config.max_concurrency = args.concurrency.max(1);
    if let Some(var) = &args.api_key_env {
        let key = std::env::var(var).map_err(|_| {
            Error::Config(format!(
                "--api-key-env {var}: the environment variable is not set"
            ))
        })?;
        config.api_key = Some(key);
    }
    let mut params = SamplingParams::greedy(args.max_tokens);
    if let Some(t) = args.temperature {
        params.temperature = t;
    }
    params.validate()?;
    Ok(Agent::endpoint(HttpPolicy::new(config)?, params))
}

/// The envs of `--suite`, else of `--config`.
fn suite_envs(args: &EvalArgs) -> Result<Vec<Arc<dyn EnvFactory>>> {
    match (args.suite.as_deref(), &args.config) {
        (Some("all"), _) => agentrl_env::env_ids()
            .into_iter()
            .map(agentrl_env::lookup)
            .collect(),
        (Some(list), _) => list
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(agentrl_env::lookup)
            .collect(),
        (None, Some(config)) => crate::envs::source_factories(&RunConfig::load(config)?.env),
        (None, None) => Err(Error::Config(
            "name the envs: --suite all, --suite ID[,ID...], or --config FILE".into(),
        )),
    }
}

/// `--endpoint` or `--reference` on the suite's envs; the episodes go to
/// `RUN_DIR/samples/eval_{label}.jsonl` and the report to `RUN_DIR/metrics.jsonl`.
async fn eval_agent(args: &EvalArgs, agent: &Agent, label: &str) -> Result<EvalReport> {
    let envs = suite_envs(args)?;
    let options = SuiteOptions {
        tasks_per_env: args.tasks.unwrap_or(SuiteOptions::default().tasks_per_env),
        samples: args.samples.unwrap_or(1).max(1),
        concurrency: args.concurrency.max(1),
    };
    let (report, episodes) = evaluate_agent(agent, &envs, &options).await?;
    std::fs::create_dir_all(&args.run_dir).map_err(|e| Error::io("creating", &args.run_dir, e))?;
    let mut metrics = crate::metrics::MetricsWriter::open(&args.run_dir.join("metrics.jsonl"))?;
    crate::eval::save_evaluation(&args.run_dir, label, 0, &report, &episodes, &mut metrics)?;
    Ok(report)
}

/// Runs the whole demo and prints its headline. The run's `status.json` says running, then
/// finished or failed.
pub async fn demo(args: &DemoArgs) -> Result<()> {
    if let Some(weights) = &args.sft_from {
        existing(weights, "SFT weights (--sft-from)")?;
        // --fresh would delete the weights before the run could read them.
        let deleted_by_fresh = args.fresh
            && std::fs::canonicalize(weights)
                .ok()
                .zip(std::fs::canonicalize(&args.run_dir).ok())
                .is_some_and(|(w, d)| w.starts_with(d));
        if deleted_by_fresh {
            return Err(Error::Config(format!(
                "--sft-from {} lies inside {}, which --fresh deletes; copy it elsewhere first",
                weights.display(),
                args.run_dir.display()
            )));
        }
    }
    if args.fresh {
        remove_previous_run(&args.run_dir)?;
    }
    run_status::track(&args.run_dir, "demo", demo_steps(args)).await
}

/// The body of [`demo`] after `--fresh`.
async fn demo_steps(args: &DemoArgs) -> Result<()> {
    let mut config = RunConfig::load(&args.config)?;
    if let Some(seed) = args.seed {
        config.seed = seed;
    }
    let summary = crate::run::demo_from(config, &args.run_dir, args.sft_from.as_deref()).await?;
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
    let is_run = dir.join("metrics.jsonl").exists()
        || dir.join("config.toml").exists()
        || dir.join(run_status::STATUS_FILE).exists();
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
