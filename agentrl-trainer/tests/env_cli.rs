//! The `agentrl env` subcommands, run through the built binary.

use std::process::Command;

fn agentrl(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn env_list_shows_every_env_with_a_description() {
    let (ok, text) = agentrl(&["env", "list"]);
    assert!(ok, "{text}");
    for id in ["arith-calc", "math-reasoning", "maze", "text-adventure"] {
        let line = text.lines().find(|l| l.starts_with(id)).unwrap();
        assert!(line.len() > id.len() + 10, "{line}");
    }
}

#[test]
fn env_check_maze_passes() {
    let (ok, text) = agentrl(&["env", "check", "maze", "--tasks", "20"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("reference solver: success 1.000 on 20 test tasks"),
        "{text}"
    );
    assert!(text.contains("random policy:"), "{text}");
    let answered = text.matches("error observation, no crash").count();
    assert_eq!(answered, 4, "{text}");
}

#[test]
fn env_check_of_an_unknown_env_fails() {
    let (ok, text) = agentrl(&["env", "check", "nope"]);
    assert!(!ok);
    assert!(text.contains("known env ids"), "{text}");
}
