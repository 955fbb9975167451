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

mod controller;
mod env_command;
mod env_server;

pub use controller::{ControllerArgs, run_controller};
pub use env_command::{EnvCommand, run_env_command};
pub use env_server::{EnvServerArgs, run_env_server};

/// Waits for Ctrl-C; if it cannot be listened for, warns and waits forever (until killed).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!("cannot listen for Ctrl-C ({e}); serving until killed");
        std::future::pending::<()>().await;
    }
}
