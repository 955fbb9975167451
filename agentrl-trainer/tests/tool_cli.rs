//! `agentrl tool list` and `agentrl tool call` run as the built binary.

use std::process::{Command, Output};

fn agentrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn lists_every_tool() {
    let out = agentrl(&["tool", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let names: Vec<&str> = text.lines().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(
        names,
        [
            "calculator",
            "read_file",
            "write_file",
            "list_dir",
            "shell",
            "python"
        ]
    );
    assert!(
        text.contains("calculator\tEvaluates an arithmetic expression"),
        "{text}"
    );
}

#[test]
fn calls_the_calculator() {
    let out = agentrl(&["tool", "call", "calculator", r#"{"expression":"6*7"}"#]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "42\n");
}

#[test]
fn bad_arguments_fail_with_a_clear_error() {
    let out = agentrl(&["tool", "call", "calculator", r#"{"expr":"6*7"}"#]);
    assert!(!out.status.success());
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("error: tool `calculator`: invalid arguments:")
            && err.contains("\"expression\" is a required property"),
        "{err}"
    );
    let out = agentrl(&["tool", "call", "calculator", "{not json"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("arguments are not valid JSON"),
        "{}",
        stderr(&out)
    );
    let out = agentrl(&["tool", "call", "search", "{}"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown tool `search` (available tools: calculator"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn workspace_tools_use_the_given_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let args = r#"{"path":"a.txt","content":"hi"}"#;
    let out = agentrl(&["tool", "call", "write_file", args, "--workspace", ws]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = agentrl(&[
        "tool",
        "call",
        "shell",
        r#"{"command":"cat a.txt"}"#,
        "--workspace",
        ws,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "exit status: 0\n--- stdout ---\nhi\n");
    let out = agentrl(&["tool", "call", "read_file", r#"{"path":"a.txt"}"#]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("needs a session workspace"),
        "{}",
        stderr(&out)
    );
}
