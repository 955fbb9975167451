//! What `agentrl` prints on stderr when it is not a terminal: plain periodic progress lines for
//! each phase (demonstrations, SFT, RL, eval), one JSON object per line with
//! `--log-format json`, and nothing but the results with `--quiet`.

use std::path::Path;
use std::process::Command;

/// A demo small enough for a debug build: every phase runs, briefly.
const TINY_DEMO: &str = r#"
seed = 3
torch_threads = 1

[env]
id = "arith-calc"

[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 160

[sft]
demos = 40
steps = 2
batch_size = 4
lr = 1e-3

[rl]
steps = 2
tasks_per_step = 2
group_size = 2
lr = 1e-3
max_new_tokens = 24

[eval]
tasks = 6
max_new_tokens = 24
"#;

/// Runs `agentrl ARGS demo` on the tiny config in `dir`; returns (success, stdout, stderr).
fn demo(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let config = dir.join("tiny.toml");
    std::fs::write(&config, TINY_DEMO).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(args)
        .arg("demo")
        .arg("--config")
        .arg(&config)
        .arg("--run-dir")
        .arg(dir.join("run"))
        .arg("--fresh")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn json_logs_are_one_object_per_line_with_a_progress_line_per_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = demo(dir.path(), &["--log-format", "json"]);
    assert!(ok, "{stdout}\n{stderr}");
    let mut messages = Vec::new();
    for line in stderr.lines() {
        assert!(!line.contains('\u{1b}'), "escape codes in {line:?}");
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line:?}"));
        assert!(event["level"].is_string(), "{line}");
        assert!(event["timestamp"].is_string(), "{line}");
        messages.push(
            event["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    for (phase, total) in [("demos", 40), ("SFT", 2), ("RL", 2), ("eval", 6)] {
        let done = format!("{phase} {total}/{total} (");
        assert!(
            messages.iter().any(|m| m.starts_with(&done)),
            "no final progress line `{done}...` in {messages:#?}"
        );
    }
    assert!(stdout.contains("held-out success"), "{stdout}");
}

#[test]
fn quiet_prints_only_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = demo(dir.path(), &["--quiet"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(stderr.trim(), "", "--quiet still logged");
    assert!(stdout.contains("held-out success"), "{stdout}");
}

#[test]
fn a_json_error_is_a_json_line_and_a_failing_exit() {
    let output = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["--log-format", "json", "show", "no-such-file.jsonl"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let event: serde_json::Value = serde_json::from_str(stderr.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stderr:?}"));
    assert_eq!(event["level"], "ERROR");
    let message = event["fields"]["message"].as_str().unwrap_or("");
    assert!(message.contains("no-such-file.jsonl"), "{message}");
}
