//! The tool box of a tool-using env session: built when the session is made, and, should that
//! fail, kept as the reason, reported as an env error when the session is used.

use agentrl_core::{Error, Message, Result, StepInfo, Tool, ToolContext, ToolSpec};
use agentrl_tools::{ToolBox, ToolLimits};
use serde_json::{Value, json};

use crate::session::run_tool_calls;

/// The spec of a function tool `name` that takes exactly one argument, `arg`, of JSON schema
/// `schema` (no other argument is allowed).
pub(crate) fn single_arg_spec(name: &str, description: &str, arg: &str, schema: Value) -> ToolSpec {
    let mut properties = serde_json::Map::new();
    properties.insert(arg.to_string(), schema);
    ToolSpec::function(
        name,
        description,
        json!({
            "type": "object",
            "properties": properties,
            "required": [arg],
            "additionalProperties": false
        }),
    )
}

/// A session's tool box, or why it could not be built, with the context its tools run in.
pub(crate) struct SessionTools {
    env_id: &'static str,
    built: std::result::Result<ToolBox, String>,
    ctx: ToolContext,
}

impl SessionTools {
    /// `built` as the tool box of a session of env `env_id` (an `Err` says why there is none).
    pub(crate) fn new(env_id: &'static str, built: std::result::Result<ToolBox, String>) -> Self {
        SessionTools {
            env_id,
            built,
            ctx: ToolContext::default(),
        }
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

    /// Runs the tool calls of `action` (see [`run_tool_calls`]), stopping early once `stop()`
    /// holds; an error when there is no tool box.
    pub(crate) async fn run(
        &self,
        action: &Message,
        stop: impl Fn() -> bool,
    ) -> Result<(Vec<Message>, StepInfo)> {
        Ok(run_tool_calls(self.get()?, &self.ctx, action, stop).await)
    }
}
