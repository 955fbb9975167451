//! The tool box of a tool-using env session: built when the session is made, and, should that
//! fail, kept as the reason, reported as an env error when the session is used.

use agentrl_core::{Error, Result, Tool};
use agentrl_tools::{ToolBox, ToolLimits};

/// A session's tool box, or why it could not be built.
pub(crate) struct SessionTools {
    env_id: &'static str,
    built: std::result::Result<ToolBox, String>,
}

impl SessionTools {
    /// `built` as the tool box of a session of env `env_id` (an `Err` says why there is none).
    pub(crate) fn new(env_id: &'static str, built: std::result::Result<ToolBox, String>) -> Self {
        SessionTools { env_id, built }
    }

    /// A tool box with default limits that holds `tool` alone; `name` names the tool in the
    /// reason, should the tool box refuse it.
    pub(crate) fn single(env_id: &'static str, name: &str, tool: impl Tool + 'static) -> Self {
        let built = ToolBox::new(ToolLimits::default())
            .with(tool)
            .map_err(|e| format!("cannot set up the {name} tool: {e}"));
        SessionTools::new(env_id, built)
    }

    /// The tool box, or the env error explaining why there is none.
    pub(crate) fn get(&self) -> Result<&ToolBox> {
        self.built
            .as_ref()
            .map_err(|why| Error::env(self.env_id, why.clone()))
    }
}
