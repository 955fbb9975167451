//! `agentrl tool list` run as the built binary: the `tool` subcommand is wired to
//! `agentrl_tools::cli` (whose own tests cover every command in process).

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
            "python",
            "sql",
            "spreadsheet",
            "search",
            "http",
            "browser"
        ]
    );
    assert!(
        text.contains("calculator\tEvaluates an arithmetic expression"),
        "{text}"
    );
}
