//! The result of dispatching one tool call.

use agentrl_core::{Message, ToolError};

/// What a dispatched call produced: the tool message for the conversation, and the error if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// A `tool` message answering the call: the output, or `error: <reason>`.
    pub message: Message,
    /// Why the call failed, when it did.
    pub error: Option<ToolError>,
}

impl ToolOutcome {
    /// Whether the call itself was malformed (unknown tool or invalid arguments): the model's
    /// fault, unlike a tool that ran and failed or timed out.
    pub fn is_invalid_action(&self) -> bool {
        matches!(
            self.error,
            Some(ToolError::UnknownTool(_) | ToolError::InvalidArguments(_))
        )
    }

    /// Whether the tool's machinery could not run the call ([`ToolError::Unavailable`]): an
    /// env error, neither the agent's fault nor an answer to show it.
    pub fn is_unavailable(&self) -> bool {
        matches!(self.error, Some(ToolError::Unavailable(_)))
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}
