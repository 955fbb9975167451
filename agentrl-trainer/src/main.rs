//! `agentrl`: train, evaluate and demo LLM agents from one TOML run config.

use std::process::ExitCode;

use agentrl_core::Result;
use agentrl_env::cli::{LogArgs, LogOptions};
use agentrl_trainer::commands;
use agentrl_trainer::rescore::RescoreArgs;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "agentrl",
    version,
    about = "Train LLM agents with reinforcement learning"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Behaviour cloning from demonstrations (generated into the run dir unless --demos is given).
    Sft(commands::SftArgs),
    /// GRPO with the async pipeline; resumes from the run's latest checkpoint when there is one.
    Train(commands::TrainArgs),
    /// Greedy success rate of a checkpoint on held-out test tasks.
    Eval(commands::EvalArgs),
    /// SFT warm start, evaluation, GRPO, evaluation; writes summary.json and a learning curve.
    Demo(commands::DemoArgs),
    /// Renders one saved episode (roles, tool calls and results, reward breakdown, the policy
    /// of each turn) from a trajectories JSONL file.
    Show(agentrl_trainer::show::ShowArgs),
    /// One Markdown table of the finished demo runs in a folder (per-env held-out success
    /// after RL, change from SFT, RL time, throughput; seeds `NAME-seedN` as mean ± std), and
    /// with `--baseline NAME` each variant's difference from NAME seed by seed.
    Compare(agentrl_trainer::compare::CompareArgs),
    /// Serves a web dashboard of the runs in a folder (status, live learning curves, evals,
    /// an episode browser) on 127.0.0.1:8050 until Ctrl-C.
    Dashboard(agentrl_trainer::dashboard::DashboardArgs),
    /// Lists the envs (`env list`) or checks one (`env check ID [--tasks N]`).
    Env {
        #[command(subcommand)]
        command: agentrl_env::cli::EnvCommand,
    },
    /// Re-scores saved trajectories with the config's `[reward]` tree: one JSON line per
    /// trajectory ({task_id, group_id, total, parts}); bad lines and a summary go to stderr.
    Reward(RescoreArgs),
    /// Lists every tool, or calls one with JSON arguments (`tool call NAME 'JSON'`).
    #[cfg(feature = "full")]
    Tool {
        #[command(subcommand)]
        command: agentrl_tools::cli::ToolCommand,
    },
    /// Serves envs over the env HTTP protocol (AgentRL's /api routes) until Ctrl-C.
    EnvServer(agentrl_env::cli::EnvServerArgs),
    /// Runs the central controller that routes env sessions to registered env servers.
    Controller(agentrl_env::cli::ControllerArgs),
    /// Prints, as JSON, the log-probability of each token id given its prefix under a Llama
    /// model (checkpoint directory, .safetensors or .gguf).
    #[cfg(feature = "full")]
    Logprobs(agentrl_policy::serve::logprobs::LogprobsArgs),
    /// Greedily answers one user message with a Llama-family model (.gguf file or Hugging
    /// Face directory), using the model's own tokenizer and chat template.
    #[cfg(feature = "full")]
    Chat(agentrl_policy::serve::chat::ChatArgs),
    /// Serves a model over an OpenAI-compatible HTTP API (completions with token ids and
    /// logprobs, chat with tools, weight reloads) until Ctrl-C.
    #[cfg(feature = "full")]
    Serve(agentrl_policy::serve::ServeArgs),
}

fn main() -> ExitCode {
    agentrl_trainer::allocator::keep_freed_memory();
    let cli = Cli::parse();
    let writer = agentrl_trainer::progress::init(&cli.log);
    let logging = LogOptions::new(cli.log).with_writer(writer);
    agentrl_env::cli::run_binary_with(logging, run(cli.command))
}

async fn run(command: Command) -> Result<()> {
    match command {
        Command::Sft(args) => commands::sft(&args).await?,
        Command::Train(args) => commands::train(&args).await?,
        Command::Eval(args) => commands::eval(&args).await?,
        Command::Demo(args) => commands::demo(&args).await?,
        Command::Show(args) => agentrl_trainer::show::show(&args, &mut std::io::stdout())?,
        Command::Compare(args) => agentrl_trainer::compare::compare(&args, &mut std::io::stdout())?,
        Command::Dashboard(args) => agentrl_trainer::dashboard::dashboard(args).await?,
        Command::Env { command } => agentrl_env::cli::run_env_command(command).await?,
        Command::Reward(args) => commands::reward(&args).await?,
        #[cfg(feature = "full")]
        Command::Tool { command } => {
            agentrl_tools::cli::run(command, &mut std::io::stdout()).await?
        }
        Command::EnvServer(args) => agentrl_env::cli::run_env_server(args).await?,
        Command::Controller(args) => agentrl_env::cli::run_controller(args).await?,
        #[cfg(feature = "full")]
        Command::Logprobs(args) => {
            agentrl_policy::serve::logprobs::run(&args, &mut std::io::stdout())?
        }
        #[cfg(feature = "full")]
        Command::Chat(args) => agentrl_policy::serve::chat::run(&args, &mut std::io::stdout())?,
        #[cfg(feature = "full")]
        Command::Serve(args) => agentrl_policy::serve::run(args).await?,
    }
    Ok(())
}
