//! The `os-shell` session: a fresh workspace per episode, the sandboxed `shell` tool and the
//! read-only file tools; a message without tool calls is the final answer, which is checked
//! against the expected answer or, for chores, the final workspace.

use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::{ListDir, ReadFile, Sandbox, SandboxConfig, Shell, ToolBox, ToolLimits};
use async_trait::async_trait;
use serde_json::json;

use super::OS_SHELL_ID;
use super::task::{ShellTask, shell_task_of};
use crate::answer::answer_matches;
use crate::session::{continue_step, final_step, invalid_step, run_tool_calls, wrong_role};
use crate::workspace::Workspace;

/// What to do instead of a malformed action.
const HINT: &str = "call the shell tool, or answer in a message without tool calls";

/// One running episode: its task and its workspace (removed when the episode is dropped).
struct Episode {
    task: ShellTask,
    workspace: Workspace,
}

/// One `os-shell` session, without turn limit (the factory adds it).
pub struct OsShellEnv {
    tools: std::result::Result<ToolBox, String>,
    episode: Option<Episode>,
}

impl Default for OsShellEnv {
    fn default() -> Self {
        Self::new(SandboxConfig::default())
    }
}

impl OsShellEnv {
    /// A session whose `shell` tool runs in a sandbox built from `sandbox`.
    pub fn new(sandbox: SandboxConfig) -> Self {
        let sandbox = Arc::new(Sandbox::new(sandbox));
        let tools = ToolBox::new(ToolLimits::default())
            .with(Shell::new(sandbox))
            .and_then(|b| b.with(ReadFile::default()))
            .and_then(|b| b.with(ListDir::default()))
            .map_err(|e| format!("cannot set up the tools: {e}"));
        OsShellEnv {
            tools,
            episode: None,
        }
    }
}

/// Whether `reply` names `expected` (a workspace path): its last word, stripped of quotes,
/// a leading `./` or `/workspace/` and trailing punctuation.
pub fn path_matches(reply: &str, expected: &str) -> bool {
    let Some(word) = reply.split_whitespace().last() else {
        return false;
    };
    let word = word
        .trim_start_matches(['`', '"', '\''])
        .trim_end_matches(['`', '"', '\'', ',', ';', ':', '.']);
    let word = word.strip_prefix("/workspace/").unwrap_or(word);
    word.strip_prefix("./").unwrap_or(word) == expected
}

/// Whether the final `reply` solves `task` given the workspace now.
fn check(task: &ShellTask, reply: &str, workspace: &Workspace) -> Result<bool> {
    if let Some(expected) = task.expected_files() {
        let now = workspace
            .snapshot()
            .map_err(|e| Error::env(OS_SHELL_ID, format!("cannot read the workspace: {e}")))?;
        let renamed = expected.iter().all(|(p, c)| now.get(p) == Some(c));
        let left = now
            .keys()
            .any(|p| p.starts_with("notes/") && p.ends_with(".txt"));
        return Ok(renamed && !left);
    }
    let Some(answer) = task.answer() else {
        return Ok(false);
    };
    Ok(match answer.parse::<i64>() {
        Ok(n) => answer_matches(reply, n),
        Err(_) => path_matches(reply, &answer),
    })
}

#[async_trait]
impl Env for OsShellEnv {
    fn id(&self) -> &str {
        OS_SHELL_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.episode = None;
        let tools = self
            .tools
            .as_ref()
            .map_err(|why| Error::env(OS_SHELL_ID, why.clone()))?
            .specs();
        let shell_task = shell_task_of(task)?;
        let workspace = Workspace::create(OS_SHELL_ID, &shell_task.files)?;
        let prompt = shell_task.prompt();
        self.episode = Some(Episode {
            task: shell_task,
            workspace,
        });
        Ok(Observation {
            messages: vec![Message::user(prompt)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(episode) = &self.episode else {
            return Err(Error::env(OS_SHELL_ID, "step called outside an episode"));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if action.tool_calls.is_empty() {
            if action.text().trim().is_empty() {
                return Ok(invalid_step("empty message", HINT));
            }
            let success = check(&episode.task, action.text(), &episode.workspace)?;
            let mut info = StepInfo::default();
            if let Some(answer) = episode.task.answer() {
                info.extra.insert("expected".into(), json!(answer));
            }
            self.episode = None;
            return Ok(final_step(Vec::new(), success, info));
        }
        let toolbox = self
            .tools
            .as_ref()
            .map_err(|why| Error::env(OS_SHELL_ID, why.clone()))?;
        let ctx = episode.workspace.context();
        let (messages, info) = run_tool_calls(OS_SHELL_ID, toolbox, &ctx, action, || false).await?;
        Ok(continue_step(messages, info))
    }
}
