//! Tools that run model-written code in the [`Sandbox`]: [`Shell`] (`shell {command}`, run by
//! `sh -c`) and [`Python`] (`python {code}`, fed to `python3 -` on stdin). Both answer with the
//! exit status, stdout and stderr (capped); a wall-clock time-out is [`ToolError::Timeout`].

use std::sync::Arc;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::parse_args;
use crate::sandbox::{RunOutput, Sandbox, Termination};

/// Longest `command` accepted, in bytes (a single argument cannot exceed 128 KiB on Linux).
pub const MAX_COMMAND_BYTES: usize = 100_000;
/// Longest `code` accepted, in bytes.
pub const MAX_CODE_BYTES: usize = 1 << 20;

/// The `shell` tool: runs a command with `sh -c` in the sandbox, in the workspace.
#[derive(Debug, Clone, Default)]
pub struct Shell {
    sandbox: Arc<Sandbox>,
}

/// The `python` tool: runs Python 3 code in the sandbox, in the workspace.
#[derive(Debug, Clone)]
pub struct Python {
    sandbox: Arc<Sandbox>,
    interpreter: String,
}

impl Shell {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "shell";

    /// A shell tool running in `sandbox`.
    pub fn new(sandbox: Arc<Sandbox>) -> Self {
        Shell { sandbox }
    }
}

impl Python {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "python";

    /// A python tool running `python3` (from the sandbox's `PATH`) in `sandbox`.
    pub fn new(sandbox: Arc<Sandbox>) -> Self {
        Python {
            sandbox,
            interpreter: "python3".to_string(),
        }
    }

    /// Uses another interpreter program inside the sandbox.
    pub fn with_interpreter(mut self, interpreter: impl Into<String>) -> Self {
        self.interpreter = interpreter.into();
        self
    }
}

impl Default for Python {
    fn default() -> Self {
        Python::new(Arc::default())
    }
}

/// The arguments of the `shell` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    /// The command line.
    command: String,
}

/// The arguments of the `python` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PythonArgs {
    /// The program's source code.
    code: String,
}

/// `value`, the argument `key`, when it is at most `max` bytes long.
fn within_limit(value: String, key: &str, max: usize) -> Result<String, ToolError> {
    if value.len() > max {
        return Err(ToolError::InvalidArguments(format!(
            "`{key}` has {} bytes, more than the limit of {max}",
            value.len()
        )));
    }
    Ok(value)
}

/// Runs `argv` in the sandbox for tool `tool` and turns the result into the tool's answer.
async fn run_in_sandbox(
    sandbox: &Sandbox,
    tool: &str,
    ctx: &ToolContext,
    argv: Vec<String>,
    stdin: Option<Vec<u8>>,
) -> Result<String, ToolError> {
    let Some(workspace) = &ctx.workspace else {
        return Err(ToolError::Unavailable(format!(
            "`{tool}` needs a session workspace, and this session has none"
        )));
    };
    let output: RunOutput = sandbox.run(workspace, &argv, stdin).await?;
    if output.termination == Termination::TimedOut {
        let ms = u64::try_from(sandbox.config().limits.wall_time.as_millis()).unwrap_or(u64::MAX);
        return Err(ToolError::Timeout(ms));
    }
    Ok(output.report())
}

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Runs a shell command (sh -c) in a sandbox without network, in the workspace \
             directory; answers with the exit status, stdout and stderr.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line, e.g. \"ls -l && wc -l *.txt\"."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let ShellArgs { command } = parse_args(args)?;
        let command = within_limit(command, "command", MAX_COMMAND_BYTES)?;
        let argv = vec!["sh".to_string(), "-c".to_string(), command];
        run_in_sandbox(&self.sandbox, Self::NAME, ctx, argv, None).await
    }
}

#[async_trait]
impl Tool for Python {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Runs a Python 3 program in a sandbox without network, in the workspace directory; \
             answers with the exit status, stdout and stderr (print what you want to see).",
            json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The program's source code."}
                },
                "required": ["code"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let PythonArgs { code } = parse_args(args)?;
        let code = within_limit(code, "code", MAX_CODE_BYTES)?;
        let argv = vec![self.interpreter.clone(), "-".to_string()];
        let stdin = Some(code.into_bytes());
        run_in_sandbox(&self.sandbox, Self::NAME, ctx, argv, stdin).await
    }
}
