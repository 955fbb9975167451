//! `agentrl`: train, evaluate and demo LLM agents from one TOML run config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentrl_core::{Error, Result};
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::run::{Run, demo};
use clap::{Parser, Subcommand};

mod env_cli;

mod controller_cli;
mod env_server_cli;
mod tool_cli;

#[derive(Parser)]
#[command(
    name = "agentrl",
    version,
    about = "Train LLM agents with reinforcement learning"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Behaviour cloning from demonstrations (generated into the run dir unless --demos is given).
    Sft {
        /// Run config (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Run directory.
        #[arg(long)]
        run_dir: PathBuf,
        /// Demonstration trajectories (JSONL) to use instead of generating them.
        #[arg(long)]
        demos: Option<PathBuf>,
    },
    /// GRPO with the async pipeline; resumes from the run's latest checkpoint when there is one.
    Train {
        /// Run config (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Run directory.
        #[arg(long)]
        run_dir: PathBuf,
        /// Initial weights (default: the run's SFT checkpoint when present, else random).
        #[arg(long)]
        init: Option<PathBuf>,
    },
    /// Greedy success rate of a checkpoint on held-out test tasks.
    Eval {
        /// Run config (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Weights to evaluate (safetensors).
        #[arg(long)]
        checkpoint: PathBuf,
        /// Run directory for the metrics record.
        #[arg(long, default_value = "runs/eval")]
        run_dir: PathBuf,
        /// Number of test tasks (default: the config's).
        #[arg(long)]
        tasks: Option<usize>,
    },
    /// SFT warm start, evaluation, GRPO, evaluation; writes summary.json and a learning curve.
    Demo {
        /// Run config (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Run directory.
        #[arg(long)]
        run_dir: PathBuf,
        /// Delete the run directory first (it must look like a run: hold metrics.jsonl or be empty).
        #[arg(long)]
        fresh: bool,
    },
    /// Lists the envs (`env list`) or checks one (`env check ID [--tasks N]`).
    Env {
        #[command(subcommand)]
        command: env_cli::EnvCommand,
    },
    /// Re-scores saved trajectories with the config's `[reward]` tree: one JSON line per
    /// trajectory ({task_id, group_id, total, parts}); bad lines and a summary go to stderr.
    Reward {
        /// Run config (TOML) whose `[reward]` tree is used.
        #[arg(long)]
        config: PathBuf,
        /// Trajectories to score (JSONL).
        #[arg(long)]
        trajectories: PathBuf,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Weights of the run's model shape for an llm_judge in the reward tree.
        #[arg(long)]
        judge_checkpoint: Option<PathBuf>,
    },
    /// Lists every tool, or calls one with JSON arguments (`tool call NAME 'JSON'`).
    Tool {
        #[command(subcommand)]
        command: tool_cli::ToolCommand,
    },
    /// Serves envs over the env HTTP protocol (AgentRL's /api routes) until Ctrl-C.
    EnvServer(env_server_cli::EnvServerArgs),
    /// Runs the central controller that routes env sessions to registered env servers.
    Controller(controller_cli::ControllerArgs),
    /// Prints, as JSON, the log-probability of each token id given its prefix under a Llama
    /// model (checkpoint directory, .safetensors or .gguf).
    Logprobs(agentrl_policy::serve::logprobs::LogprobsArgs),
    /// Greedily answers one user message with a Llama-family model (.gguf file or Hugging
    /// Face directory), using the model's own tokenizer and chat template.
    Chat(agentrl_policy::serve::chat::ChatArgs),
    /// Serves a model over an OpenAI-compatible HTTP API (completions with token ids and
    /// logprobs, chat with tools, weight reloads) until Ctrl-C.
    Serve(agentrl_policy::serve::ServeArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

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

async fn run(command: Command) -> Result<()> {
    match command {
        Command::Sft {
            config,
            run_dir,
            demos,
        } => {
            let run = Run::new(RunConfig::load(&config)?, &run_dir)?;
            let demos = match demos {
                Some(d) => {
                    existing(&d, "demonstrations file")?;
                    d
                }
                None => run.write_demonstrations().await?,
            };
            run.sft(&demos)?;
            println!(
                "SFT done: {}",
                run_dir.join("checkpoints/sft.safetensors").display()
            );
        }
        Command::Train {
            config,
            run_dir,
            init,
        } => {
            let run = Run::new(RunConfig::load(&config)?, &run_dir)?;
            let (learner, start) = match run.latest_checkpoint()? {
                Some((step, file)) => {
                    println!("resuming from {} (step {step})", file.display());
                    (run.learner(run.config.rl.lr, Some(&file))?, step)
                }
                None => {
                    let sft = run_dir.join("checkpoints/sft.safetensors");
                    let init = init.or_else(|| sft.exists().then_some(sft));
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
        }
        Command::Eval {
            config,
            checkpoint,
            run_dir,
            tasks,
        } => {
            existing(&checkpoint, "checkpoint")?;
            let mut cfg = RunConfig::load(&config)?;
            if let Some(n) = tasks {
                cfg.eval.tasks = n;
            }
            let run = Run::new(cfg, &run_dir)?;
            let learner = run.learner(run.config.rl.lr, Some(&checkpoint))?;
            let report = run.evaluate(&learner, "eval", 0).await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&report).map_err(|e| Error::json("report", e))?
            );
        }
        Command::Demo {
            config,
            run_dir,
            fresh,
        } => {
            if fresh {
                remove_previous_run(&run_dir)?;
            }
            let summary = demo(RunConfig::load(&config)?, &run_dir).await?;
            println!(
                "held-out success: {:.3} after SFT -> {:.3} after {} RL steps ({} tasks); {:.0} s",
                summary.eval_success_before_rl,
                summary.eval_success_after_rl,
                summary.rl_steps,
                summary.eval_tasks,
                summary.wall_seconds
            );
            println!("summary: {}", run_dir.join("summary.json").display());
        }
        Command::Env { command } => env_cli::run(command).await?,
        Command::Reward {
            config,
            trajectories,
            out,
            judge_checkpoint,
        } => {
            existing(&trajectories, "trajectories file")?;
            let args = agentrl_trainer::rescore::RescoreArgs {
                config,
                trajectories,
                out,
                judge_checkpoint,
            };
            agentrl_trainer::rescore::run_rescore(&args, &mut std::io::stderr()).await?;
        }
        Command::Tool { command } => tool_cli::run(command).await?,
        Command::EnvServer(args) => env_server_cli::run(args).await?,
        Command::Controller(args) => controller_cli::run(args).await?,
        Command::Logprobs(args) => {
            agentrl_policy::serve::logprobs::run(&args, &mut std::io::stdout())?
        }
        Command::Chat(args) => agentrl_policy::serve::chat::run(&args, &mut std::io::stdout())?,
        Command::Serve(args) => agentrl_policy::serve::run(args).await?,
    }
    Ok(())
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
