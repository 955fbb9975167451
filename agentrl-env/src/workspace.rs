//! Session workspaces for the file-based envs (`os-shell`, `code-fix`): a temporary directory
//! filled with a task's files and removed when the session drops it, plus helpers to read a
//! task's file list and a sandbox report's stdout.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use agentrl_core::{Error, Result, Task, ToolContext};
use agentrl_tools::{Sandbox, SandboxError};
use serde_json::{Value, json};

/// Runs `true` in a `sandbox` over an empty workspace: an [`Error::Env`] of `env_id` saying why
/// when the sandbox cannot start (bubblewrap missing, user namespaces not allowed).
pub(crate) async fn check_sandbox(env_id: &str, sandbox: &Sandbox) -> Result<()> {
    let workspace = Workspace::create(env_id, &BTreeMap::new())?;
    let argv = ["true".to_string()];
    let output = sandbox
        .run(workspace.path(), &argv, None)
        .await
        .map_err(|e| {
            let hint = match e {
                SandboxError::Setup { .. } => {
                    "; bubblewrap needs unprivileged user namespaces (in a container: run it \
                     with them allowed)"
                }
                _ => "",
            };
            Error::env(env_id, format!("{e}{hint} (checked before the run)"))
        })?;
    if !output.success() {
        return Err(Error::env(
            env_id,
            format!(
                "the sandbox started, but `true` in it ended with {} (checked before the run)",
                output.status_line()
            ),
        ));
    }
    Ok(())
}

/// A private directory holding one episode's files; deleted on drop.
#[derive(Debug)]
pub(crate) struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    /// A fresh temporary directory holding `files` (relative path → content).
    pub(crate) fn create(env_id: &str, files: &BTreeMap<String, String>) -> Result<Self> {
        let fail = |what: String| Error::env(env_id, what);
        let dir = tempfile::Builder::new()
            .prefix("agentrl-ws-")
            .tempdir()
            .map_err(|e| fail(format!("cannot create a session workspace: {e}")))?;
        for (path, content) in files {
            if !is_plain_relative(path) {
                return Err(fail(format!(
                    "task file path `{path}` is not a plain relative path"
                )));
            }
            let target = dir.path().join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| fail(format!("cannot create the folder of `{path}`: {e}")))?;
            }
            std::fs::write(&target, content)
                .map_err(|e| fail(format!("cannot write task file `{path}`: {e}")))?;
        }
        Ok(Workspace { dir })
    }

    /// The directory on the host.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A tool context whose workspace is this directory.
    pub(crate) fn context(&self) -> ToolContext {
        ToolContext {
            workspace: Some(self.dir.path().to_path_buf()),
        }
    }

    /// Every regular file under the workspace (relative path with `/` → content, lossy UTF-8).
    pub(crate) fn snapshot(&self) -> std::io::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let root = self.path();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    pending.push(entry.path());
                } else if kind.is_file() {
                    let path = entry.path();
                    let relative = path.strip_prefix(root).unwrap_or(&path);
                    let name = relative.to_string_lossy().replace('\\', "/");
                    let bytes = std::fs::read(&path)?;
                    out.insert(name, String::from_utf8_lossy(&bytes).into_owned());
                }
            }
        }
        Ok(out)
    }
}

/// Whether `path` is relative and made of normal components only (no `..`, no root).
fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// `files` as task data: an array of `{path, content}` objects in path order.
pub(crate) fn files_to_json(files: &BTreeMap<String, String>) -> Value {
    Value::Array(
        files
            .iter()
            .map(|(path, content)| json!({ "path": path, "content": content }))
            .collect(),
    )
}

/// The `files` array of a task's data, as written by [`files_to_json`].
pub(crate) fn files_of(env_id: &str, task: &Task) -> Result<BTreeMap<String, String>> {
    let bad = |why: &str| Error::env(env_id, format!("task `{}`: {why}", task.id));
    let list = task
        .data
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("data has no array `files`"))?;
    let mut files = BTreeMap::new();
    for item in list {
        let path = item.get("path").and_then(Value::as_str);
        let content = item.get("content").and_then(Value::as_str);
        let (Some(path), Some(content)) = (path, content) else {
            return Err(bad("each file needs string `path` and `content`"));
        };
        files.insert(path.to_string(), content.to_string());
    }
    Ok(files)
}

/// The stdout section of a `shell`/`python` tool report (`""` when it printed nothing).
pub(crate) fn report_stdout(report: &str) -> &str {
    let Some((_, rest)) = report.split_once("--- stdout ---\n") else {
        return "";
    };
    rest.split_once("\n--- stderr ---\n")
        .map_or(rest, |(out, _)| out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use agentrl_tools::SandboxConfig;

    use super::*;

    #[tokio::test]
    async fn a_sandbox_that_cannot_start_fails_the_check_naming_the_env() {
        let missing = Sandbox::new(SandboxConfig {
            bwrap: PathBuf::from("/nonexistent/bwrap"),
            ..SandboxConfig::default()
        });
        let err = check_sandbox("os-shell", &missing)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("environment `os-shell`"), "{err}");
        assert!(
            err.contains("bubblewrap (`/nonexistent/bwrap`) was not found"),
            "{err}"
        );
        assert!(err.contains("checked before the run"), "{err}");
    }

    #[test]
    fn workspace_round_trip_and_cleanup() {
        let files = BTreeMap::from([
            ("a/b.txt".to_string(), "hi\n".to_string()),
            ("c.md".to_string(), String::new()),
        ]);
        let ws = Workspace::create("t", &files).unwrap();
        let path = ws.path().to_path_buf();
        assert_eq!(ws.snapshot().unwrap(), files);
        drop(ws);
        assert!(!path.exists());
        let bad = BTreeMap::from([("../x".to_string(), String::new())]);
        assert!(Workspace::create("t", &bad).is_err());
    }

    #[test]
    fn stdout_of_reports() {
        assert_eq!(report_stdout("exit status: 0\n--- stdout ---\n3\n"), "3\n");
        let both = "exit status: 1\n--- stdout ---\nx\n--- stderr ---\ny";
        assert_eq!(report_stdout(both), "x");
        assert_eq!(report_stdout("exit status: 0"), "");
    }
}
