//! The `shell` and `python` tools through a ToolBox: reports, time-outs, missing workspace
//! and a missing sandbox.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrl_core::{ToolCall, ToolContext, ToolError};
use agentrl_tools::{FileLimits, SandboxConfig, ToolLimits, ToolOutcome, standard_toolbox};
use serde_json::{Value, json};

async fn call_with(
    config: SandboxConfig,
    ws: Option<&Path>,
    name: &str,
    args: Value,
) -> ToolOutcome {
    let limits = ToolLimits {
        timeout: Duration::from_secs(30),
        max_output_chars: 4000,
    };
    let toolbox = standard_toolbox(limits, FileLimits::default(), config).unwrap();
    let ctx = ToolContext {
        workspace: ws.map(Path::to_path_buf),
    };
    toolbox
        .dispatch(&ToolCall::new("call_1", name, &args), &ctx)
        .await
}

async fn call(ws: Option<&Path>, name: &str, args: Value) -> ToolOutcome {
    call_with(SandboxConfig::default(), ws, name, args).await
}

#[test]
fn standard_toolbox_names() {
    let toolbox = standard_toolbox(
        ToolLimits::default(),
        FileLimits::default(),
        SandboxConfig::default(),
    )
    .unwrap();
    assert_eq!(
        toolbox.names(),
        [
            "calculator",
            "read_file",
            "write_file",
            "list_dir",
            "shell",
            "python"
        ]
    );
}

#[tokio::test]
async fn shell_reports_status_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = call(
        Some(dir.path()),
        "shell",
        json!({"command": "echo hi > f.txt; cat f.txt; ls nope"}),
    )
    .await;
    assert!(out.is_ok(), "{}", out.message.text());
    let text = out.message.text();
    assert!(
        text.starts_with("exit status: 2\n--- stdout ---\nhi\n\n--- stderr ---\nls:"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn python_runs_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.txt"), "3 4").unwrap();
    let code =
        "import os\na, b = map(int, open('data.txt').read().split())\nprint(a * b, os.getcwd())";
    let out = call(Some(dir.path()), "python", json!({"code": code})).await;
    assert_eq!(
        out.message.text(),
        "exit status: 0\n--- stdout ---\n12 /workspace\n"
    );
    let out = call(
        Some(dir.path()),
        "python",
        json!({"code": "raise SystemExit('bad input')"}),
    )
    .await;
    assert_eq!(
        out.message.text(),
        "exit status: 1\n--- stderr ---\nbad input\n"
    );
}

#[tokio::test]
async fn wall_clock_timeout_is_a_timeout_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SandboxConfig::default();
    config.limits.wall_time = Duration::from_millis(300);
    let out = call_with(
        config,
        Some(dir.path()),
        "shell",
        json!({"command": "sleep 10"}),
    )
    .await;
    assert_eq!(out.error, Some(ToolError::Timeout(300)));
    assert_eq!(out.message.text(), "error: timed out after 300 ms");
}

#[tokio::test]
async fn needs_a_workspace_and_a_sandbox() {
    let out = call(None, "shell", json!({"command": "true"})).await;
    assert_eq!(
        out.error,
        Some(ToolError::Unavailable(
            "`shell` needs a session workspace, and this session has none".into()
        ))
    );
    let dir = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        bwrap: PathBuf::from("/nonexistent/bwrap"),
        ..SandboxConfig::default()
    };
    let out = call_with(
        config,
        Some(dir.path()),
        "python",
        json!({"code": "open('ran', 'w')"}),
    )
    .await;
    let text = out.message.text();
    // The machine's fault, not the agent's: the envs end such an episode as an env error.
    assert!(out.is_unavailable(), "{text}");
    assert!(!out.is_invalid_action(), "{text}");
    assert!(
        text.contains("bubblewrap (`/nonexistent/bwrap`) was not found"),
        "{text}"
    );
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn oversized_command_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let command = "#".repeat(agentrl_tools::exec::MAX_COMMAND_BYTES + 1);
    let out = call(Some(dir.path()), "shell", json!({"command": command})).await;
    assert!(out.is_invalid_action(), "{}", out.message.text());
}

#[tokio::test]
async fn an_abandoned_call_leaves_no_process_behind() {
    // The ToolBox gives up before the sandbox's own limit: dropping the call kills the sandbox.
    let dir = tempfile::tempdir().unwrap();
    let limits = ToolLimits {
        timeout: Duration::from_millis(300),
        max_output_chars: 4000,
    };
    let toolbox =
        standard_toolbox(limits, FileLimits::default(), SandboxConfig::default()).unwrap();
    let ctx = ToolContext {
        workspace: Some(dir.path().to_path_buf()),
    };
    let args = json!({"command": "(sleep 1; echo late > late.txt) & sleep 3"});
    let out = toolbox
        .dispatch(&ToolCall::new("call_1", "shell", &args), &ctx)
        .await;
    assert_eq!(out.error, Some(ToolError::Timeout(300)));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        !dir.path().join("late.txt").exists(),
        "a sandboxed process outlived the call"
    );
}
