//! `agentrl env list` on the main binary: the env commands are `agentrl_env::cli`'s (tested
//! with the `agentrl-env` binary in agentrl-env's tests); this checks they are wired in.

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
