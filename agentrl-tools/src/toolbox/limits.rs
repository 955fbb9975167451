//! Per-call limits applied by the [`ToolBox`](super::ToolBox).

use std::time::Duration;

/// Limits applied to every tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Wall-clock time a call may take before it is abandoned.
    pub timeout: Duration,
    /// Longest output (in characters) shown to the model; longer output is truncated.
    pub max_output_chars: usize,
}

impl Default for ToolLimits {
    /// 5 seconds and 4000 characters.
    fn default() -> Self {
        ToolLimits {
            timeout: Duration::from_secs(5),
            max_output_chars: 4000,
        }
    }
}
