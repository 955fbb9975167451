//! The tool contract: a named function the model calls with JSON arguments.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::ToolSpec;

/// Where a tool call runs: the session's workspace and limits shared by the session's tools.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// Private working directory of the session, for tools that touch files.
    pub workspace: Option<PathBuf>,
}

/// Why a tool call failed. The message is shown to the model as the tool's answer, except
/// for [`ToolError::Unavailable`], which is the machine's fault and ends the episode as an env
/// error instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema or meaning.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed (e.g. division by zero).
    #[error("{0}")]
    Failed(String),
    /// The tool took longer than its time limit.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// No tool of that name is available.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The tool's machinery could not run the call at all (a sandbox that cannot start, a
    /// service that is down): nothing the agent did, so it is not an observation to learn
    /// from.
    #[error("{0}")]
    Unavailable(String),
}

/// A tool the agent can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The spec shown to the model (name, description, JSON Schema of the arguments).
    fn spec(&self) -> ToolSpec;

    /// Runs the tool on already-validated arguments and returns its text output.
    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError>;
}
