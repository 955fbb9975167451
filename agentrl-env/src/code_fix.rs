//! `code-fix`: a small generated Python module with planted bugs and its `unittest` tests; the
//! agent reads and edits the files and runs the tests in the sandbox; the reward is the share of
//! tests that pass when it says it is done.

mod catalog;
mod demonstrator;
mod env;
mod task;

use agentrl_core::{Env, Message, Result, Role, Split, Task, ToolCall};
use agentrl_tools::Sandbox;
use async_trait::async_trait;
use serde_json::json;

pub use catalog::{Case, TEMPLATES, Template};
pub use demonstrator::{CODE_FIX_DEMONSTRATOR_KNOBS, code_fix_demonstrator};
pub use env::CodeFixEnv;
pub use task::{Bug, Project, generate, project_of, to_task};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::workspace::check_sandbox;
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const CODE_FIX_ID: &str = "code-fix";

/// Steps allowed per episode.
pub const CODE_FIX_MAX_TURNS: usize = 12;

/// The `code-fix` factory; `seed` selects the task set (default `0`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeFix {
    /// Seed of the task generator.
    pub seed: u64,
}

impl CodeFix {
    /// The factory for the task set of `seed`.
    pub fn new(seed: u64) -> Self {
        CodeFix { seed }
    }
}

#[async_trait]
impl EnvFactory for CodeFix {
    fn id(&self) -> &str {
        CODE_FIX_ID
    }

    fn description(&self) -> &str {
        "fix planted bugs in a small Python module until its unittest tests pass"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(CodeFixEnv::default(), CODE_FIX_MAX_TURNS))
    }

    fn max_turns(&self) -> usize {
        CODE_FIX_MAX_TURNS
    }

    /// The sandbox its `shell` tool runs in must start.
    async fn preflight(&self) -> Result<()> {
        check_sandbox(CODE_FIX_ID, &Sandbox::default()).await
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(CodeFixExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        CODE_FIX_DEMONSTRATOR_KNOBS
    }

    /// See [`code_fix_demonstrator`].
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(code_fix_demonstrator(seed, knobs)?))
    }
}

/// `source` with every planted bug line replaced by its fix.
pub fn apply_fixes(source: &str, bugs: &[Bug]) -> String {
    let mut lines: Vec<&str> = source.split('\n').collect();
    for bug in bugs {
        for line in lines.iter_mut().filter(|l| **l == bug.buggy) {
            *line = &bug.fixed;
        }
    }
    lines.join("\n")
}

/// The reference solver, which knows the planted bugs from the task data: it reads the module,
/// writes it back with the buggy lines fixed, runs the tests with the shell tool, then says
/// it is done.
#[derive(Debug, Clone, Copy, Default)]
pub struct CodeFixExpert;

impl Solver for CodeFixExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_action(task, history, false)
    }
}

/// The next action of the scripted agents on `task` after `history`; with `first_bug_only`
/// the module is written back with only the first planted bug fixed.
fn next_action(task: &Task, history: &[Message], first_bug_only: bool) -> Message {
    let project = match project_of(task) {
        Ok(p) => p,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let last_call = history
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| m.tool_calls.last());
    let id = format!("call_{}", history.len());
    let call = match last_call.map(|c| c.function.name.as_str()) {
        None => ToolCall::new(id, "read_file", &json!({ "path": project.module_file() })),
        Some("read_file") => {
            let read = history.iter().rev().find(|m| m.role == Role::Tool);
            let source = read.map_or("", |m| m.text());
            let bugs = match project.bugs.split_first() {
                Some((first, _)) if first_bug_only => std::slice::from_ref(first),
                _ => &project.bugs[..],
            };
            let fixed = apply_fixes(source, bugs);
            let args = json!({ "path": project.module_file(), "content": fixed });
            ToolCall::new(id, "write_file", &args)
        }
        Some("write_file") => ToolCall::new(
            id,
            "shell",
            &json!({ "command": "python3 -m unittest 2>&1 | tail -n 3" }),
        ),
        Some(_) => return Message::assistant("done"),
    };
    Message::assistant_tool_calls(None, vec![call])
}
