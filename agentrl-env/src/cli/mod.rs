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

use agentrl_core::Result;

mod controller;
mod env_command;
mod env_server;
mod logging;

pub use controller::{ControllerArgs, run_controller};
pub use env_command::{EnvCommand, run_env_command};
pub use env_server::{EnvServerArgs, run_env_server};
pub use logging::{LogArgs, LogFormat, LogOptions};

/// The body of an AgentRL binary's `main` with default logging ([`LogOptions::default`]):
/// see [`run_binary_with`].
pub fn run_binary(command: impl std::future::Future<Output = Result<()>>) -> ExitCode {
    run_binary_with(LogOptions::default(), command)
}

/// The body of an AgentRL binary's `main`: logs to stderr as `options` say (`RUST_LOG`, else
/// `info`, or `warn` with `--quiet`; text in colour only when stderr is a terminal and
/// `NO_COLOR` is unset, so logs written to a file or a pipe carry no escape codes; or one JSON
/// object per line), runs `command` on a multi-threaded tokio runtime, and turns an error into
/// `error: ...` on stderr (a JSON `ERROR` event with `--log-format json`) and a failing exit
/// code.
pub fn run_binary_with(
    options: LogOptions,
    command: impl std::future::Future<Output = Result<()>>,
) -> ExitCode {
    let format = options.args.log_format;
    options.init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format, &format!("could not start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report_error(format, &e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// Prints a fatal error the way the log format asks.
fn report_error(format: LogFormat, message: &str) {
    match format {
        LogFormat::Text => eprintln!("error: {message}"),
        LogFormat::Json => tracing::error!("{message}"),
    }
}

/// Waits for Ctrl-C; if it cannot be listened for, warns and waits forever (until killed).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!("cannot listen for Ctrl-C ({e}); serving until killed");
        std::future::pending::<()>().await;
    }
}
