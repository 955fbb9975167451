//! Scaffolding of tool-using env sessions: the session's tool box (built when the session is
//! made; should that fail, the reason is reported as an env error when the session is used),
//! the spec of a one-argument tool, and the episode of an env where the agent calls tools and
//! then gives one final answer.

use agentrl_core::{Error, Message, Result, Step, StepInfo, Tool, ToolContext, ToolSpec};
use agentrl_tools::{ToolBox, ToolLimits};
use serde_json::{Value, json};

use crate::session::{continue_step, invalid_step, run_tool_calls, wrong_role};

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
    /// holds; an error when there is no tool box or a tool could not run.
    pub(crate) async fn run(
        &self,
        action: &Message,
        stop: impl Fn() -> bool,
    ) -> Result<(Vec<Message>, StepInfo)> {
        run_tool_calls(self.env_id, self.get()?, &self.ctx, action, stop).await
    }
}

/// Where a session of a "call tools, then give one final answer" env stands.
#[derive(Debug)]
pub(crate) enum AnswerEpisode<T> {
    /// No episode started yet.
    Idle,
    /// An episode is in progress; its expected answer.
    Running(T),
    /// The agent gave its final answer.
    Finished,
}

impl<T> AnswerEpisode<T> {
    /// The expected answer of the episode in progress, or the env error for a step outside one.
    pub(crate) fn expected(&self, env_id: &str) -> Result<&T> {
        match self {
            AnswerEpisode::Running(answer) => Ok(answer),
            AnswerEpisode::Idle => Err(Error::env(env_id, "step called before reset")),
            AnswerEpisode::Finished => Err(Error::env(
                env_id,
                "step called after the final answer; call reset first",
            )),
        }
    }
}

/// What a "call tools, then give one final answer" env makes of an action.
pub(crate) enum Reply<'a> {
    /// The step to answer with: the action's tool calls ran, or it was unusable.
    Step(Step),
    /// The action is the final answer, with this text.
    Answer(&'a str),
}

/// Runs the tool calls of `action` (the episode goes on), or takes its text as the final
/// answer; a non-assistant or empty message is an invalid action answered with `hint`.
pub(crate) async fn tools_or_answer<'a>(
    tools: &SessionTools,
    action: &'a Message,
    hint: &str,
) -> Result<Reply<'a>> {
    if let Some(reason) = wrong_role(action) {
        return Ok(Reply::Step(invalid_step(&reason, hint)));
    }
    if !action.tool_calls.is_empty() {
        let (messages, info) = tools.run(action, || false).await?;
        return Ok(Reply::Step(continue_step(messages, info)));
    }
    let text = action.text();
    if text.trim().is_empty() {
        return Ok(Reply::Step(invalid_step("empty message", hint)));
    }
    Ok(Reply::Answer(text))
}
