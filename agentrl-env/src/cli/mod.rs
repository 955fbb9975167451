//! The env side's command line (feature `cli`): the clap arguments and the functions behind
//! `agentrl-env list|check|serve|controller`, which the trainer's `agentrl env list|check`,
//! `agentrl env-server` and `agentrl controller` call too (same flags, same output).
//!
//! ```no_run
//! use agentrl_env::cli::{EnvCommand, run_env_command};
//!
//! # async fn list() -> agentrl_core::Result<()> {
//! run_env_command(EnvCommand::List).await // prints every env id with its description
//! # }
//! ```

use std::process::ExitCode;

use std::io::IsTerminal;

use agentrl_core::Result;

mod controller;
mod env_command;
mod env_server;

pub use controller::{ControllerArgs, run_controller};
pub use env_command::{EnvCommand, run_env_command};
pub use env_server::{EnvServerArgs, run_env_server};

/// The body of an AgentRL binary's `main` (`agentrl-env`, and `agentrl` in the trainer):
/// logs to stderr (`RUST_LOG`, default `info`; in colour only when stderr is a terminal and
/// `NO_COLOR` is unset, so logs written to a file or a pipe carry no escape codes), runs
/// `command` on a multi-threaded tokio runtime, and turns an error into `error: ...` on stderr
/// and a failing exit code.
pub fn run_binary(command: impl std::future::Future<Output = Result<()>>) -> ExitCode {
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
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
    match runtime.block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Waits for Ctrl-C; if it cannot be listened for, warns and waits forever (until killed).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!("cannot listen for Ctrl-C ({e}); serving until killed");
        std::future::pending::<()>().await;
    }
}
