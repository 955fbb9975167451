//! Why a command could not be run in the sandbox.

use std::path::PathBuf;

use agentrl_core::ToolError;

/// A failure to build the sandbox or to start the command in it; the command never ran
/// outside the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The bubblewrap program does not exist.
    #[error(
        "the sandbox is unavailable: bubblewrap (`{}`) was not found; install the `bubblewrap` \
         package or configure the bwrap path; the command was not run",
        program.display()
    )]
    BwrapNotFound {
        /// The program that was looked for.
        program: PathBuf,
    },
    /// The bubblewrap program exists but could not be started.
    #[error("the sandbox is unavailable: could not start `{}`: {source}; the command was not run", program.display())]
    Spawn {
        /// The program that failed to start.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// bubblewrap started but could not set the sandbox up (e.g. user namespaces are forbidden),
    /// or the resource limits could not be applied inside it.
    #[error(
        "the sandbox could not be set up (exit status {code}): {message}; the command was not run"
    )]
    Setup {
        /// bubblewrap's exit status.
        code: i32,
        /// What bubblewrap (or the limit wrapper) printed.
        message: String,
    },
    /// The workspace to mount is missing or not a directory.
    #[error("sandbox workspace {}: {reason}", path.display())]
    Workspace {
        /// The host path of the workspace.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Talking to the running sandbox failed.
    #[error("sandbox I/O failed while {action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Every sandbox error means the command never ran, which is the machine's fault, not the
/// agent's: [`ToolError::Unavailable`].
impl From<SandboxError> for ToolError {
    fn from(e: SandboxError) -> Self {
        ToolError::Unavailable(e.to_string())
    }
}
