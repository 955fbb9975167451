//! `agentrl env`: list the registered envs, and check one: reference solver and random-policy
//! success rates on test tasks, and malformed actions answered with error observations.

use agentrl_core::Result;
use agentrl_env::{env_ids, lookup};
use clap::Subcommand;

/// The `agentrl env` subcommands.
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// List the env ids, each with a one-line description.
    List,
    /// Run the reference solver and a random policy on test tasks, then malformed actions;
    /// fails if the solver is below 0.95 or a malformed action is not answered with an error.
    Check {
        /// Env id.
        id: String,
        /// Number of test tasks for each policy.
        #[arg(long, default_value_t = 100)]
        tasks: u64,
    },
}

/// Runs an `agentrl env` subcommand, printing to stdout.
pub async fn run(command: EnvCommand) -> Result<()> {
    match command {
        EnvCommand::List => {
            for id in env_ids() {
                println!("{id:<16} {}", lookup(id)?.description());
            }
            Ok(())
        }
        EnvCommand::Check { id, tasks } => check(&id, tasks).await,
    }
}

/// The whole `env check`: prints every result, then fails if any part failed.
async fn check(id: &str, tasks: u64) -> Result<()> {
    let report = agentrl_env::check(lookup(id)?, tasks).await?;
    print!("{report}");
    report.ensure_passed()
}
