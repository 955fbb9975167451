//! `agentrl-env`: list and check the envs, serve them over the env HTTP protocol, and run the
//! controller in front of env servers; the env side of `agentrl`, without libtorch.

use std::process::ExitCode;

use agentrl_env::cli::{
    ControllerArgs, EnvCommand, EnvServerArgs, LogArgs, LogOptions, run_binary_with,
    run_controller, run_env_command, run_env_server,
};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "agentrl-env",
    version,
    about = "List, check and serve AgentRL environments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Env(EnvCommand),
    /// Serves envs over the env HTTP protocol (AgentRL's /api routes) until Ctrl-C.
    Serve(EnvServerArgs),
    /// Runs the central controller that routes env sessions to registered env servers.
    Controller(ControllerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    run_binary_with(LogOptions::new(cli.log), async {
        match cli.command {
            Command::Env(command) => run_env_command(command).await,
            Command::Serve(args) => run_env_server(args).await,
            Command::Controller(args) => run_controller(args).await,
        }
    })
}
