//! The dataset session: shows a row's prompt (after the optional system prompt) with the
//! dataset's tools, runs tool calls, and checks the first message without tool calls as the
//! final answer.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use async_trait::async_trait;
use serde_json::Value;

use super::checker::{CheckerKind, Verdict, check_in_process};
use super::final_answer::extract_final_answer;
use super::task_row::TaskRow;
use super::tools::{SessionToolBox, ToolSet};
use crate::session::{continue_step, final_step, invalid_step, run_tool_calls, wrong_role};

/// Prefix of the note that hands the reference to the reward's LLM judge (`judge` checker).
pub const REFERENCE_NOTE: &str = "Reference answer (for grading): ";

/// What every session of one dataset shares.
#[derive(Debug)]
pub struct SessionSettings {
    /// The env id sessions report.
    pub env_id: &'static str,
    /// System prompt put before prompts that have none.
    pub system: Option<String>,
    /// The tools of every episode.
    pub tools: ToolSet,
    /// Relative tolerance of the numeric checker.
    pub tolerance: f64,
}

/// Where a session stands.
enum State {
    /// No episode running.
    Idle,
    /// An episode of this row, with its tools (none when the dataset has none).
    Running(Box<TaskRow>, Option<SessionToolBox>),
}

/// One session of a dataset, without turn limit (the factory adds it).
pub struct DatasetEnv {
    settings: Arc<SessionSettings>,
    state: State,
}

impl DatasetEnv {
    /// A fresh session with `settings`.
    pub fn new(settings: Arc<SessionSettings>) -> Self {
        DatasetEnv {
            settings,
            state: State::Idle,
        }
    }

    /// The hint after an unusable action.
    fn hint(&self) -> &'static str {
        if self.settings.tools.is_empty() {
            "reply with your final answer"
        } else {
            "call a tool or reply with your final answer"
        }
    }

    /// The verdict on final message `text` for `row`.
    async fn verdict(&self, row: &TaskRow, text: &str) -> Result<Verdict> {
        let answer = extract_final_answer(text);
        let kind = row.checker.resolve(&row.reference);
        if let Some(v) =
            check_in_process(kind, &row.reference, answer, text, self.settings.tolerance)
        {
            return Ok(v);
        }
        match (kind, &row.script) {
            (CheckerKind::Judge, _) => Ok(Verdict::undecided()),
            (_, Some(script)) => run_script(self.settings.env_id, kind, script, answer, row).await,
            (_, None) => Err(Error::env(
                self.settings.env_id,
                format!("task `{}`: checker `{}` has no script", row.id, kind.name()),
            )),
        }
    }
}

/// Runs a script checker (needs the sandbox of feature `shell-envs`).
#[cfg(feature = "shell-envs")]
async fn run_script(
    env_id: &str,
    kind: CheckerKind,
    script: &str,
    answer: &str,
    row: &TaskRow,
) -> Result<Verdict> {
    super::script::run_script_checker(env_id, kind, script, answer, &row.reference).await
}

/// Without the sandbox a script checker cannot run.
#[cfg(not(feature = "shell-envs"))]
async fn run_script(
    env_id: &str,
    kind: CheckerKind,
    _script: &str,
    _answer: &str,
    _row: &TaskRow,
) -> Result<Verdict> {
    Err(Error::env(
        env_id,
        format!(
            "checker `{}` needs agentrl-env's `shell-envs` feature",
            kind.name()
        ),
    ))
}

/// The last step of an episode with `verdict` on `answer`; a `judge` row (no verdict) ends
/// with the reference in a note for the reward's judge and no success flag.
fn last_step(verdict: Verdict, answer: &str, reference: &str) -> Step {
    let mut info = StepInfo::default();
    info.extra.insert("answer".into(), Value::from(answer));
    if let Some(feedback) = verdict.feedback {
        info.extra.insert("feedback".into(), Value::from(feedback));
    }
    match verdict.success {
        Some(success) => final_step(Vec::new(), success, info),
        None => {
            info.extra
                .insert("reference".into(), Value::from(reference));
            Step {
                messages: vec![Message::user(format!("{REFERENCE_NOTE}{reference}"))],
                reward: 0.0,
                terminated: true,
                truncated: false,
                info,
            }
        }
    }
}

#[async_trait]
impl Env for DatasetEnv {
    fn id(&self) -> &str {
        self.settings.env_id
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.state = State::Idle;
        let row = TaskRow::from_task(self.settings.env_id, task)?;
        let tools = match self.settings.tools.is_empty() {
            true => None,
            false => Some(self.settings.tools.build(self.settings.env_id)?),
        };
        let mut messages = Vec::with_capacity(row.prompt.len() + 1);
        let has_system = row
            .prompt
            .first()
            .is_some_and(|m| m.role == agentrl_core::Role::System);
        if let (Some(system), false) = (&self.settings.system, has_system) {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(row.prompt.iter().cloned());
        let specs = tools
            .as_ref()
            .map(|t| t.toolbox.specs())
            .unwrap_or_default();
        self.state = State::Running(Box::new(row), tools);
        Ok(Observation {
            messages,
            tools: specs,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let State::Running(row, tools) = &self.state else {
            return Err(Error::env(
                self.settings.env_id,
                "step called outside an episode",
            ));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, self.hint()));
        }
        if !action.tool_calls.is_empty() {
            let Some(tools) = tools else {
                return Ok(invalid_step("this task has no tools", self.hint()));
            };
            let (messages, info) = run_tool_calls(
                self.settings.env_id,
                &tools.toolbox,
                &tools.ctx,
                action,
                || false,
            )
            .await?;
            return Ok(continue_step(messages, info));
        }
        let text = action.text();
        if text.trim().is_empty() {
            return Ok(invalid_step("empty message", self.hint()));
        }
        let verdict = self.verdict(row, text).await?;
        let step = last_step(verdict, extract_final_answer(text), &row.reference);
        self.state = State::Idle;
        Ok(step)
    }
}
