//! `agentrl tool list` and `agentrl tool call NAME 'JSON-ARGS' [--workspace DIR]`: the standard
//! tools (calculator, workspace files, sandboxed shell and Python) from the command line.

use std::path::PathBuf;
use std::time::Duration;

use agentrl_core::{Error, Result, ToolCall, ToolContext};
use agentrl_tools::{FileLimits, SandboxConfig, ToolBox, ToolLimits, standard_toolbox};
use clap::Subcommand;

/// Time a call may take beyond the sandbox's own wall-clock limit before the ToolBox gives up.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(2);
/// Longest output printed by `tool call`.
const MAX_OUTPUT_CHARS: usize = 100_000;

/// The `tool` subcommands.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Lists every tool: its name and description.
    List,
    /// Calls a tool with JSON arguments and prints its output (non-zero exit on error).
    Call {
        /// Tool name (see `agentrl tool list`).
        name: String,
        /// The arguments as a JSON object, e.g. '{"expression": "6*7"}'.
        args: String,
        /// Session workspace for the file, shell and python tools.
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

/// The standard toolbox with the default sandbox and a ToolBox time-out just above its limit.
fn toolbox() -> Result<ToolBox> {
    let sandbox = SandboxConfig::default();
    let limits = ToolLimits {
        timeout: sandbox.limits.wall_time + TIMEOUT_MARGIN,
        max_output_chars: MAX_OUTPUT_CHARS,
    };
    standard_toolbox(limits, FileLimits::default(), sandbox)
}

/// Runs a `tool` subcommand, printing to stdout; a failed call is an [`Error::Tool`].
pub async fn run(command: ToolCommand) -> Result<()> {
    let toolbox = toolbox()?;
    match command {
        ToolCommand::List => {
            for spec in toolbox.specs() {
                println!("{}\t{}", spec.function.name, spec.function.description);
            }
            Ok(())
        }
        ToolCommand::Call {
            name,
            args,
            workspace,
        } => {
            if let Some(dir) = &workspace
                && !dir.is_dir()
            {
                return Err(Error::Config(format!(
                    "--workspace {} is not a directory",
                    dir.display()
                )));
            }
            let mut call = ToolCall::new("cli_call", name.clone(), &serde_json::json!({}));
            call.function.arguments = args;
            let outcome = toolbox.dispatch(&call, &ToolContext { workspace }).await;
            let text = outcome.message.text();
            if outcome.is_ok() {
                println!("{text}");
                return Ok(());
            }
            Err(Error::Tool {
                tool: name,
                message: text.strip_prefix("error: ").unwrap_or(text).to_string(),
            })
        }
    }
}
