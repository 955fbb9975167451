//! The `code-fix` session: a fresh workspace per episode with the buggy module and its tests,
//! file tools and sandboxed `shell`/`python`; a message without tool calls ends the episode,
//! and the env then restores the test file and runs the tests itself in the sandbox.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, Step, StepInfo, Task};
use agentrl_tools::{
    ListDir, Python, ReadFile, Sandbox, SandboxConfig, Shell, ToolBox, ToolLimits, WriteFile,
};
use async_trait::async_trait;
use serde_json::json;

use super::CODE_FIX_ID;
use super::task::{Project, project_of};
use crate::session::{continue_step, invalid_step, run_tool_calls, wrong_role};
use crate::workspace::Workspace;

/// What to do instead of a malformed action.
const HINT: &str =
    "call a tool (read_file, write_file, shell, ...) or reply `done` without tool calls";

/// One running episode.
struct Episode {
    project: Project,
    workspace: Workspace,
}

/// One `code-fix` session, without turn limit (the factory adds it).
pub struct CodeFixEnv {
    sandbox: Arc<Sandbox>,
    tools: std::result::Result<ToolBox, String>,
    episode: Option<Episode>,
}

impl Default for CodeFixEnv {
    fn default() -> Self {
        Self::new(SandboxConfig::default())
    }
}

impl CodeFixEnv {
    /// A session whose `shell`, `python` and final test run use a sandbox built from `sandbox`.
    pub fn new(sandbox: SandboxConfig) -> Self {
        let sandbox = Arc::new(Sandbox::new(sandbox));
        let tools = ToolBox::new(ToolLimits::default())
            .with(ReadFile::default())
            .and_then(|b| b.with(WriteFile::default()))
            .and_then(|b| b.with(ListDir::default()))
            .and_then(|b| b.with(Shell::new(Arc::clone(&sandbox))))
            .and_then(|b| b.with(Python::new(Arc::clone(&sandbox))))
            .map_err(|e| format!("cannot set up the tools: {e}"));
        CodeFixEnv {
            sandbox,
            tools,
            episode: None,
        }
    }
}

/// A marker the agent's code cannot know, so it cannot forge the runner's result line.
fn nonce() -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x5EED);
    format!("agentrl-result-{:016x}", hasher.finish())
}

/// The test runner fed to `python3 -I -`: loads the test module, runs it with output
/// swallowed and prints `NONCE run failed` (or `NONCE error`) on the real stdout.
fn runner(test_module: &str, marker: &str) -> String {
    format!(
        "import io, sys, unittest\n\
         sys.path.append('/workspace')\n\
         out = sys.stdout\n\
         sys.stdout = io.StringIO()\n\
         try:\n\
         \x20   suite = unittest.defaultTestLoader.loadTestsFromName('{test_module}')\n\
         \x20   result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)\n\
         \x20   line = '{marker} %d %d' % (result.testsRun, len(result.failures) + len(result.errors))\n\
         except BaseException as e:\n\
         \x20   line = '{marker} error'\n\
         out.write(line + '\\n')\n\
         out.flush()\n"
    )
}

/// Runs the project's tests in the sandbox (after restoring the test file) and returns how
/// many of its tests passed.
pub(crate) async fn passing_tests(
    sandbox: &Sandbox,
    project: &Project,
    workspace: &Workspace,
) -> Result<usize> {
    let test_file = project.test_file();
    if let Some(content) = project.files.get(&test_file) {
        let target = workspace.path().join(&test_file);
        // Whatever the agent left there (file, link or folder) is replaced.
        let _ = if target.is_dir() && !target.is_symlink() {
            std::fs::remove_dir_all(&target)
        } else {
            std::fs::remove_file(&target)
        };
        std::fs::write(&target, content)
            .map_err(|e| Error::env(CODE_FIX_ID, format!("cannot restore {test_file}: {e}")))?;
    }
    let marker = nonce();
    let code = runner(&format!("test_{}", project.module), &marker);
    let argv = ["python3", "-I", "-"].map(String::from);
    let output = sandbox
        .run(workspace.path(), &argv, Some(code.into_bytes()))
        .await
        .map_err(|e| Error::env(CODE_FIX_ID, format!("cannot run the tests: {e}")))?;
    let stdout = output.stdout.text();
    let counts = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(marker.as_str()))
        .and_then(|rest| {
            let mut parts = rest.split_whitespace().map(|p| p.parse::<usize>().ok());
            Some((parts.next()??, parts.next()??))
        });
    Ok(counts.map_or(0, |(run, failed)| {
        run.saturating_sub(failed).min(project.tests)
    }))
}

#[async_trait]
impl Env for CodeFixEnv {
    fn id(&self) -> &str {
        CODE_FIX_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        self.episode = None;
        let tools = self
            .tools
            .as_ref()
            .map_err(|why| Error::env(CODE_FIX_ID, why.clone()))?
            .specs();
        let project = project_of(task)?;
        let workspace = Workspace::create(CODE_FIX_ID, &project.files)?;
        let prompt = project.prompt();
        self.episode = Some(Episode { project, workspace });
        Ok(Observation {
            messages: vec![Message::user(prompt)],
            tools,
        })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let Some(episode) = &self.episode else {
            return Err(Error::env(CODE_FIX_ID, "step called outside an episode"));
        };
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid_step(&reason, HINT));
        }
        if !action.tool_calls.is_empty() {
            let toolbox = self
                .tools
                .as_ref()
                .map_err(|why| Error::env(CODE_FIX_ID, why.clone()))?;
            let ctx = episode.workspace.context();
            let (messages, info) =
                run_tool_calls(CODE_FIX_ID, toolbox, &ctx, action, || false).await?;
            return Ok(continue_step(messages, info));
        }
        if action.text().trim().is_empty() {
            return Ok(invalid_step("empty message", HINT));
        }
        let passed = passing_tests(&self.sandbox, &episode.project, &episode.workspace).await?;
        let total = episode.project.tests;
        let score = passed as f64 / total as f64;
        let mut info = StepInfo {
            success: Some(passed == total),
            score: Some(score),
            ..StepInfo::default()
        };
        info.extra.insert("tests_passed".into(), json!(passed));
        info.extra.insert("tests_total".into(), json!(total));
        self.episode = None;
        Ok(Step {
            messages: Vec::new(),
            reward: score,
            terminated: true,
            truncated: false,
            info,
        })
    }
}
