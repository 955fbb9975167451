//! `agentrl reward`: offline re-scoring of saved trajectories, broken lines reported by number.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use agentrl_core::{Message, Split, Trajectory, write_jsonl};
use agentrl_policy::{ByteTokenizer, TinyGpt};
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::rescore::{RescoreArgs, rescore_file, run_rescore};
use tch::{Device, nn};

mod common;

const RUN: &str = r#"
seed = 1
[env]
id = "arith-calc"
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 160
ffn_mult = 2
[sft]
demos = 8
steps = 1
batch_size = 4
lr = 1e-3
[sft.demonstrator]
tool_prob_two_operands = 1.0
tool_prob_three_operands = 1.0
copy_error_prob = 0.0
[rl]
steps = 1
tasks_per_step = 1
group_size = 2
lr = 1e-3
"#;

const OUTCOME_AND_FORMAT: &str = r#"
[reward]
type = "weighted_sum"
[[reward.terms]]
weight = 1.0
reward = { type = "outcome" }
[[reward.terms]]
weight = 0.5
reward = { type = "format" }
"#;

fn trajectory(task: &str, answer: &str, success: bool) -> Trajectory {
    Trajectory {
        env_id: "arith-calc".into(),
        task_id: task.into(),
        split: Split::Test,
        group_id: 9,
        messages: vec![Message::user("Compute 6*7"), Message::assistant(answer)],
        success,
        ..common::one_turn_trajectory(vec![1], vec![2, 3], vec![-0.5, -0.5])
    }
}

/// A run config with `reward`, and a JSONL whose line 2 is broken (line 4 is blank).
fn setup(dir: &Path, reward: &str) -> (PathBuf, PathBuf) {
    let config = dir.join("run.toml");
    std::fs::write(&config, format!("{RUN}{reward}")).unwrap();
    let good = dir.join("good.jsonl");
    write_jsonl(
        &good,
        &[
            trajectory("a", "42", true),
            trajectory("b", "41", false),
            trajectory("c", "42", true),
        ],
        false,
    )
    .unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mixed = format!(
        "{}\n{{\"env_id\": \"arith-calc\", broken\n{}\n\n{}\n",
        lines[0], lines[1], lines[2]
    );
    let input = dir.join("trajectories.jsonl");
    std::fs::write(&input, mixed).unwrap();
    (config, input)
}

fn lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescoring_writes_totals_and_parts_and_reports_the_broken_line() {
    let dir = tempfile::tempdir().unwrap();
    let (config, input) = setup(dir.path(), OUTCOME_AND_FORMAT);
    let reward = RunConfig::load(&config).unwrap().reward.build().unwrap();
    let mut out = Vec::new();
    let mut diag = Vec::new();
    let report = rescore_file(Arc::from(reward), &input, &mut out, &mut diag)
        .await
        .unwrap();
    let diag = String::from_utf8(diag).unwrap();
    assert!(diag.contains("skipping line 2:"), "{diag}");
    assert_eq!(report.bad_lines.len(), 1);
    assert_eq!(report.bad_lines[0].line, 2);
    assert_eq!(report.scored, 3);
    assert!(report.failed.is_empty());
    assert!((report.mean_total - (1.5 + 0.5 + 1.5) / 3.0).abs() < 1e-12);

    let rows = lines(&String::from_utf8(out).unwrap());
    assert_eq!(rows.len(), 3);
    let tasks: Vec<&str> = rows
        .iter()
        .map(|r| r["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["a", "b", "c"]);
    assert_eq!(rows[0]["group_id"], 9);
    assert_eq!(rows[0]["total"], 1.5);
    assert_eq!(rows[1]["total"], 0.5);
    assert_eq!(rows[1]["parts"]["outcome"], 0.0);
    assert_eq!(rows[1]["parts"]["format"], 1.0);
}

#[test]
fn the_cli_scores_to_a_file_and_reports_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (config, input) = setup(dir.path(), OUTCOME_AND_FORMAT);
    let out = dir.path().join("scores.jsonl");
    let run = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .arg("reward")
        .arg("--config")
        .arg(&config)
        .arg("--trajectories")
        .arg(&input)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("skipping line 2:"), "{stderr}");
    assert!(
        stderr.contains("scored 3 trajectories, mean total 1.1667; 1 bad lines; 0 failed"),
        "{stderr}"
    );
    let rows = lines(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["task_id"], "c");

    // Without --out the scores go to stdout.
    let run = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["reward", "--config"])
        .arg(&config)
        .arg("--trajectories")
        .arg(&input)
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(lines(&String::from_utf8_lossy(&run.stdout)).len(), 3);
}

const JUDGED: &str = r#"
[reward]
type = "weighted_sum"
[[reward.terms]]
weight = 1.0
reward = { type = "outcome" }
[[reward.terms]]
weight = 1.0
reward = { type = "llm_judge", rubric = "Right?", fallback = 0.25, max_transcript_chars = 60 }
"#;

#[test]
fn a_judge_without_weights_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (config, input) = setup(dir.path(), JUDGED);
    let run = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["reward", "--config"])
        .arg(&config)
        .arg("--trajectories")
        .arg(&input)
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("llm_judge") && stderr.contains("--judge-checkpoint"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_from_a_checkpoint_grades_and_its_fallbacks_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (config, input) = setup(dir.path(), JUDGED);
    // Random weights of the run's model shape.
    let cfg = RunConfig::load(&config).unwrap();
    tch::manual_seed(4);
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = TinyGpt::new(
        &vs.root(),
        cfg.model.gpt(ByteTokenizer::VOCAB_SIZE).unwrap(),
    )
    .unwrap();
    let weights = dir.path().join("judge.safetensors");
    vs.save(&weights).unwrap();

    let out = dir.path().join("scores.jsonl");
    let args = RescoreArgs {
        config,
        trajectories: input,
        out: Some(out.clone()),
        judge_checkpoint: Some(weights),
    };
    let mut diag = Vec::new();
    let report = run_rescore(&args, &mut diag).await.unwrap();
    let diag = String::from_utf8(diag).unwrap();
    assert_eq!(report.scored, 3, "{diag}");
    assert_eq!(report.bad_lines[0].line, 2);
    let rows = lines(&std::fs::read_to_string(&out).unwrap());
    let fallbacks = rows
        .iter()
        .filter(|r| r["parts"]["judge_fallback"] == 1.0)
        .count();
    assert_eq!(report.judge_fallbacks, fallbacks);
    for r in &rows {
        let judge = r["parts"]["judge"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&judge), "{r}");
        let outcome = r["parts"]["outcome"].as_f64().unwrap();
        assert!((r["total"].as_f64().unwrap() - (outcome + judge)).abs() < 1e-12);
    }
    assert!(!diag.contains("did not fit"), "{diag}");

    // A checkpoint of the wrong shape says what is wrong.
    let mut bad = args.clone();
    let other = dir.path().join("other.safetensors");
    let vs = nn::VarStore::new(Device::Cpu);
    let mut shape = cfg.model.gpt(ByteTokenizer::VOCAB_SIZE).unwrap();
    shape.d_model = 16;
    let _small = TinyGpt::new(&vs.root(), shape).unwrap();
    vs.save(&other).unwrap();
    bad.judge_checkpoint = Some(other);
    let err = run_rescore(&bad, &mut Vec::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("judge checkpoint") && err.contains("[model]"),
        "{err}"
    );
}
