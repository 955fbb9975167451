//! `agentrl demo --sft-from FILE`: the demo without its demonstrations and SFT, starting from
//! an earlier run's SFT weights (how `cargo xtask ablation` shares one SFT per seed).

use std::path::Path;
use std::process::{Command, Output};

mod common;

/// The shared tiny run config as TOML (SFT, 3 RL steps, 6 eval tasks).
fn tiny_toml() -> String {
    toml::to_string(&common::tiny_config(1)).unwrap()
}

/// Runs `agentrl demo` on `config` into `run_dir`, with `extra` arguments.
fn demo(config: &Path, run_dir: &Path, extra: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .arg("--quiet")
        .arg("demo")
        .arg("--config")
        .arg(config)
        .arg("--run-dir")
        .arg(run_dir)
        .arg("--fresh")
        .args(extra)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// The greedy held-out episodes after SFT as saved, their log-probs taken out of the turns
/// (batch composition moves them in the last bits) and returned beside them.
fn eval_after_sft(run_dir: &Path) -> (Vec<serde_json::Value>, Vec<f64>) {
    let text = std::fs::read_to_string(run_dir.join("samples/eval_after_sft.jsonl")).unwrap();
    let mut logprobs = Vec::new();
    let episodes = text
        .lines()
        .map(|line| {
            let mut episode: serde_json::Value = serde_json::from_str(line).unwrap();
            for turn in episode["turns"].as_array_mut().unwrap() {
                let lp = turn.as_object_mut().unwrap().remove("logprobs").unwrap();
                logprobs.extend(lp.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()));
            }
            episode
        })
        .collect();
    (episodes, logprobs)
}

#[test]
fn a_demo_from_saved_sft_weights_skips_sft_and_starts_where_that_run_did() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(&config, tiny_toml()).unwrap();
    let first = dir.path().join("first");
    let out = demo(&config, &first, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let weights = first.join("checkpoints/sft.safetensors");

    let second = dir.path().join("second");
    let out = demo(
        &config,
        &second,
        &["--sft-from".as_ref(), weights.as_os_str()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !second.join("demos.jsonl").exists(),
        "no demonstrations are written"
    );
    assert_eq!(
        std::fs::read(second.join("checkpoints/sft.safetensors")).unwrap(),
        std::fs::read(&weights).unwrap(),
        "the run keeps a copy of the weights it started from"
    );
    let metrics = std::fs::read_to_string(second.join("metrics.jsonl")).unwrap();
    assert!(!metrics.contains("\"sft_step\""), "no SFT step runs");
    assert!(metrics.contains("\"rl_step\""), "RL runs");
    let (episodes, logprobs) = eval_after_sft(&second);
    let (first_episodes, first_logprobs) = eval_after_sft(&first);
    assert_eq!(
        episodes, first_episodes,
        "the same weights play the same greedy held-out episodes"
    );
    assert_eq!(logprobs.len(), first_logprobs.len());
    for (a, b) in logprobs.iter().zip(&first_logprobs) {
        assert!((a - b).abs() < 1e-4, "log-prob {a} vs {b}");
    }
    let after_rl = std::fs::read_to_string(second.join("samples/eval_after_rl.jsonl")).unwrap();
    for line in after_rl.lines() {
        let episode: serde_json::Value = serde_json::from_str(line).unwrap();
        for turn in episode["turns"].as_array().unwrap() {
            assert_eq!(
                turn["policy_version"], 3,
                "evaluation turns carry the learner's step as their version"
            );
        }
    }
}

/// Runs the demo on `config` into `run_dir` with `--sft-from weights`, checks that it fails,
/// and returns its stderr.
fn refused(config: &Path, run_dir: &Path, weights: &Path) -> String {
    let out = demo(
        config,
        run_dir,
        &["--sft-from".as_ref(), weights.as_os_str()],
    );
    assert!(
        !out.status.success(),
        "--sft-from {} was accepted",
        weights.display()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn missing_or_misshapen_sft_weights_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(&config, tiny_toml()).unwrap();
    let missing = dir.path().join("nope.safetensors");
    let stderr = refused(&config, &dir.path().join("a"), &missing);
    assert!(stderr.contains("nope.safetensors"), "{stderr}");

    // Weights of another shape (a 48-wide checkpoint into a 32-wide model): the first run
    // trains a wider model.
    let wide = dir.path().join("wide.toml");
    let wider = tiny_toml().replace("d_model = 32", "d_model = 48");
    assert!(wider.contains("d_model = 48"));
    std::fs::write(&wide, wider).unwrap();
    let out = demo(&wide, &dir.path().join("wide"), &[]);
    assert!(out.status.success());
    let weights = dir.path().join("wide/checkpoints/sft.safetensors");
    let stderr = refused(&config, &dir.path().join("b"), &weights);
    assert!(stderr.contains("sft.safetensors"), "{stderr}");

    // Weights inside the run directory that --fresh would delete: refused, and kept.
    let stderr = refused(&wide, &dir.path().join("wide"), &weights);
    assert!(stderr.contains("--fresh deletes"), "{stderr}");
    assert!(weights.is_file(), "the weights are still there");
}
