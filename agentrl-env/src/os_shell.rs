//! `os-shell`: AgentBench-OS-style chores in a generated workspace (count matching log files,
//! find the largest file, count csv lines, rename files), done with a sandboxed `shell` tool.

mod demonstrator;
mod env;
mod task;

use agentrl_core::{Env, Message, Result, Role, Split, Task, ToolCall};
use agentrl_tools::Sandbox;
use async_trait::async_trait;
use serde_json::json;

pub use demonstrator::{SHELL_DEMONSTRATOR_KNOBS, shell_demonstrator};
pub use env::{OsShellEnv, path_matches};
pub use task::{Question, ShellTask, generate, shell_task_of, to_task};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::workspace::{check_sandbox, report_stdout};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const OS_SHELL_ID: &str = "os-shell";

/// Steps allowed per episode.
pub const OS_SHELL_MAX_TURNS: usize = 10;

/// The `os-shell` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsShell {
    /// Seed of the task generator.
    pub seed: u64,
}

impl OsShell {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        OsShell { seed }
    }
}

#[async_trait]
impl EnvFactory for OsShell {
    fn id(&self) -> &str {
        OS_SHELL_ID
    }

    fn description(&self) -> &str {
        "answer questions about, or rearrange, a generated file tree with a sandboxed shell"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(OsShellEnv::default(), OS_SHELL_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        OS_SHELL_MAX_TURNS
    }

    /// The sandbox its `shell` tool runs in must start.
    async fn preflight(&self) -> Result<()> {
        check_sandbox(OS_SHELL_ID, &Sandbox::default()).await
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(ShellExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        SHELL_DEMONSTRATOR_KNOBS
    }

    /// See [`shell_demonstrator`].
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(shell_demonstrator(seed, knobs)?))
    }
}

/// The reference solver: runs one shell command that computes the answer (or does the
/// chore) in the sandbox, then answers from the command's output.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellExpert;

impl ShellExpert {
    /// The shell command for `question`.
    pub fn command(question: &Question) -> String {
        match question {
            Question::CountMatching { word } => {
                format!("grep -rl --include='*.log' -- '{word}' logs | wc -l")
            }
            Question::LargestFile => {
                "find data -type f -printf '%s %p\\n' | sort -n | tail -n 1".to_string()
            }
            Question::CountLines => "find data -type f -name '*.csv' -exec cat {} + | wc -l".into(),
            Question::RenameTxt => "find notes -type f -name '*.txt' | while read -r f; do \
                                    mv \"$f\" \"${f%.txt}.md\"; done; find notes -type f"
                .to_string(),
        }
    }
}

/// The command of the scripted agents for `question`: the reference one, or with `top_only`
/// one that looks at the top folder only (`logs/*.log`, `notes/*.txt`), never in subfolders.
fn command_for(question: &Question, top_only: bool) -> String {
    match question {
        Question::CountMatching { word } if top_only => {
            format!("grep -l -- '{word}' logs/*.log | wc -l")
        }
        Question::RenameTxt if top_only => "for f in notes/*.txt; do mv \"$f\" \"${f%.txt}.md\"; \
                                            done; find notes -type f"
            .to_string(),
        _ => ShellExpert::command(question),
    }
}

impl Solver for ShellExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_action(task, history, false)
    }
}

/// The next action of the scripted agents on `task` after `history`: one command (see
/// [`command_for`] for `top_only`), then the answer read from its output.
fn next_action(task: &Task, history: &[Message], top_only: bool) -> Message {
    let shell_task = match shell_task_of(task) {
        Ok(t) => t,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let Some(report) = history.iter().rev().find(|m| m.role == Role::Tool) else {
        let command = command_for(&shell_task.question, top_only);
        let call = ToolCall::new(
            format!("call_{}", history.len()),
            "shell",
            &json!({ "command": command }),
        );
        return Message::assistant_tool_calls(None, vec![call]);
    };
    let out = report_stdout(report.text()).trim();
    match shell_task.question {
        Question::RenameTxt => Message::assistant("done"),
        Question::LargestFile => {
            let path = out.split_whitespace().last().unwrap_or("");
            Message::assistant(path.strip_prefix("./").unwrap_or(path).to_string())
        }
        _ => Message::assistant(out.to_string()),
    }
}
