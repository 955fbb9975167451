//! `[logging] tensorboard = true`: the config table parses (also through `base`), and the
//! event files `MetricsWriter` writes are read back by the `tensorboard` package's own
//! reader (skipped without it, except under CI).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use agentrl_trainer::config::RunConfig;
use agentrl_trainer::metrics::{MetricsWriter, read_metrics};
use serde_json::json;

const DEMO: &str = include_str!("../../configs/demo.toml");

/// Reads every scalar of the event files in `argv[1]` with TensorBoard's `EventAccumulator`
/// and prints them as JSON: `{tag: [[step, value], ...]}`.
const READER: &str = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
out = {t: [[e.step, e.value] for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}
print(json.dumps(out))
"#;

/// Whether `python3` can import `tensorboard`; under CI (`CI` set) its absence is a failure.
fn tensorboard_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import tensorboard"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 cannot import tensorboard: .ci/run must `pip install tensorboard`"
        );
        eprintln!("skipping: python3 cannot import tensorboard (pip install tensorboard)");
    }
    ok
}

/// Every scalar series of the event files in `dir`, as TensorBoard reads them.
fn read_scalars(dir: &Path) -> BTreeMap<String, Vec<(i64, f64)>> {
    let out = Command::new("python3")
        .args(["-c", READER])
        .arg(dir)
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "the TensorBoard reader failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// An `rl_step` record shaped like the pipeline's (per task, strings, arrays, booleans).
fn rl_step(step: u64, reward: f64, success: f64) -> serde_json::Value {
    json!({
        "kind": "rl_step", "step": step, "policy_version": step, "reward_mean": reward,
        "success_rate": success, "loss": -0.01 * step as f64, "kl": 0.002,
        "tokens_per_second": 1234.5, "staleness_max": 1.0, "dropped_stale": 0,
        "policy": "current", "staleness": [0, 1], "critic": null,
        "per_task": {
            "maze": {"episodes": 8, "success_rate": success / 2.0, "truncated_rate": 0.0},
            "arith-calc": {"episodes": 8, "success_rate": success, "tool_calls_mean": 1.5},
        },
    })
}

/// The records of a short run: SFT, evaluation, three RL steps, evaluation.
fn run_records() -> Vec<serde_json::Value> {
    vec![
        json!({"kind": "sft_step", "step": 25, "loss": 2.5, "lr": 0.003, "seconds": 1.0}),
        json!({"kind": "sft_step", "step": 50, "loss": 1.25, "lr": 0.002, "seconds": 2.0}),
        json!({"kind": "eval", "label": "before_rl", "step": 0, "success_rate": 0.125,
               "tasks": 200, "tool_use_rate": 0.5, "per_task": {"maze": {"success_rate": 0.1}}}),
        rl_step(1, 0.25, 0.25),
        rl_step(2, 0.5, 0.375),
        rl_step(3, 0.75, 0.625),
        json!({"kind": "eval", "label": "after_rl", "step": 3, "success_rate": 0.7,
               "tasks": 200, "tool_use_rate": 0.9, "per_task": {"maze": {"success_rate": 0.3}}}),
    ]
}

/// Asserts that `series` holds exactly `expected` (steps equal, values to f32 precision).
fn assert_series(scalars: &BTreeMap<String, Vec<(i64, f64)>>, tag: &str, expected: &[(i64, f64)]) {
    let got = scalars
        .get(tag)
        .unwrap_or_else(|| panic!("no tag {tag} in {:?}", scalars.keys()));
    assert_eq!(got.len(), expected.len(), "{tag}: {got:?}");
    for (&(step, value), &(want_step, want)) in got.iter().zip(expected) {
        assert_eq!(step, want_step, "{tag}: {got:?}");
        assert!(
            (value - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{tag} at {step}: {value} != {want}"
        );
    }
}

#[test]
fn tensorboard_reads_the_metrics_writers_event_file() {
    if !tensorboard_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("metrics.jsonl");
    let tb = dir.path().join("tb");
    let records = run_records();
    // The trainer opens a writer per phase; they share one event file.
    let (sft, rest) = records.split_at(2);
    let mut first = MetricsWriter::open_with_tensorboard(&jsonl, Some(&tb)).unwrap();
    for record in sft {
        first.write(record).unwrap();
    }
    let mut second = MetricsWriter::open_with_tensorboard(&jsonl, Some(&tb)).unwrap();
    assert_eq!(first.tensorboard_file(), second.tensorboard_file());
    for record in rest {
        second.write(record).unwrap();
    }
    assert_eq!(read_metrics(&jsonl).unwrap(), records);
    let files: Vec<_> = std::fs::read_dir(&tb).unwrap().collect();
    assert_eq!(files.len(), 1, "one event file: {files:?}");

    let scalars = read_scalars(&tb);
    assert_series(&scalars, "sft_step/loss", &[(25, 2.5), (50, 1.25)]);
    assert_series(&scalars, "sft_step/lr", &[(25, 0.003), (50, 0.002)]);
    let rl_success = [(1, 0.25), (2, 0.375), (3, 0.625)];
    assert_series(&scalars, "rl_step/success_rate", &rl_success);
    assert_series(&scalars, "curve/success_rate", &rl_success);
    let rl_reward = [(1, 0.25), (2, 0.5), (3, 0.75)];
    assert_series(&scalars, "rl_step/reward_mean", &rl_reward);
    assert_series(&scalars, "curve/reward_mean", &rl_reward);
    assert_series(
        &scalars,
        "rl_step/loss",
        &[(1, -0.01), (2, -0.02), (3, -0.03)],
    );
    assert_series(
        &scalars,
        "rl_step/tokens_per_second",
        &[(1, 1234.5), (2, 1234.5), (3, 1234.5)],
    );
    assert_series(
        &scalars,
        "rl_step/per_task/maze/success_rate",
        &[(1, 0.125), (2, 0.1875), (3, 0.3125)],
    );
    assert_series(
        &scalars,
        "rl_step/per_task/arith-calc/tool_calls_mean",
        &[(1, 1.5), (2, 1.5), (3, 1.5)],
    );
    assert_series(&scalars, "eval/before_rl/success_rate", &[(0, 0.125)]);
    assert_series(&scalars, "eval/after_rl/success_rate", &[(3, 0.7)]);
    assert_series(
        &scalars,
        "eval/after_rl/per_task/maze/success_rate",
        &[(3, 0.3)],
    );
    assert_series(&scalars, "curve/eval_success_rate", &[(0, 0.125), (3, 0.7)]);
    for skipped in [
        "rl_step/policy",
        "rl_step/staleness",
        "rl_step/critic",
        "rl_step/step",
    ] {
        assert!(
            !scalars.contains_key(skipped),
            "{skipped} should be skipped"
        );
    }
    assert!(
        !scalars.keys().any(|t| t.contains("label")),
        "{:?}",
        scalars.keys()
    );
}

#[test]
fn an_unwritable_event_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("tb");
    std::fs::write(&blocker, "a file where the directory should be").unwrap();
    let err = MetricsWriter::open_with_tensorboard(&dir.path().join("m.jsonl"), Some(&blocker))
        .err()
        .expect("a file in the way of tb/ is an error")
        .to_string();
    assert!(
        err.contains("TensorBoard") && err.contains(&blocker.display().to_string()),
        "{err}"
    );
}

#[test]
fn the_logging_table_parses_and_defaults_to_off() {
    let off = RunConfig::from_toml_str(DEMO, "demo.toml").unwrap();
    assert!(!off.logging.tensorboard);
    let text = format!("{DEMO}\n[logging]\ntensorboard = true\n");
    let on = RunConfig::from_toml_str(&text, "run.toml").unwrap();
    assert!(on.logging.tensorboard);
    let copy = toml::to_string_pretty(&on).unwrap();
    let again = RunConfig::from_toml_str(&copy, "config.toml").unwrap();
    assert!(
        again.logging.tensorboard,
        "the run's copy of its config keeps it"
    );
}

#[test]
fn an_unknown_logging_key_is_an_error_naming_it() {
    let text = format!("{DEMO}\n[logging]\ntensorbord = true\n");
    let err = RunConfig::from_toml_str(&text, "run.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tensorbord") && err.contains("run.toml"),
        "{err}"
    );
}

#[test]
fn the_logging_table_is_inherited_through_base() {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{DEMO}\n[logging]\ntensorboard = true\n");
    std::fs::write(dir.path().join("base.toml"), base).unwrap();
    let inherits = dir.path().join("inherits.toml");
    std::fs::write(&inherits, "base = \"base.toml\"\n[rl]\nsteps = 5\n").unwrap();
    let cfg = RunConfig::load(&inherits).unwrap();
    assert!(cfg.logging.tensorboard);
    assert_eq!(cfg.rl.steps, 5);
    let overrides = dir.path().join("overrides.toml");
    std::fs::write(
        &overrides,
        "base = \"base.toml\"\n[logging]\ntensorboard = false\n",
    )
    .unwrap();
    assert!(!RunConfig::load(&overrides).unwrap().logging.tensorboard);
    let typo = dir.path().join("typo.toml");
    std::fs::write(
        &typo,
        "base = \"base.toml\"\n[logging]\ntensorboards = true\n",
    )
    .unwrap();
    let err = RunConfig::load(&typo).unwrap_err().to_string();
    assert!(err.contains("tensorboards"), "{err}");
}
