//! `list` and `check`: list the registered envs, and check one (see [`check`](crate::check())).

use agentrl_core::Result;
use clap::Subcommand;

use crate::{check, env_ids, lookup};

/// The `list` and `check` subcommands (`agentrl env list|check`, `agentrl-env list|check`).
#[derive(Subcommand, Debug, Clone)]
pub enum EnvCommand {
    /// List the env ids, each with a one-line description and its demonstrator's knobs (the
    /// keys `[sft.demonstrator]` may set).
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

/// Runs `command`, printing to stdout; `check` prints its report, then fails if the env failed.
pub async fn run_env_command(command: EnvCommand) -> Result<()> {
    match command {
        EnvCommand::List => {
            for id in env_ids() {
                let factory = lookup(id)?;
                println!("{id:<16} {}", factory.description());
                for (option, doc) in crate::env_option_docs(id) {
                    println!("{:<16}   option {option}: {doc}", "");
                }
                for (knob, doc) in factory.demonstrator_knobs() {
                    println!("{:<16}   demonstrator knob {knob}: {doc}", "");
                }
            }
            Ok(())
        }
        EnvCommand::Check { id, tasks } => {
            let report = check(lookup(&id)?, tasks).await?;
            print!("{report}");
            report.ensure_passed()
        }
    }
}
