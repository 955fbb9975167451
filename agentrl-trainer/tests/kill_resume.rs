//! Exact resume: `agentrl train` on `configs/chaos/kill-resume.toml` (synchronous, a checkpoint
//! every step) is killed with SIGKILL three times at varied moments, resumed each time, and
//! must end with the same weights (bit for bit) and the same metrics as a run never
//! interrupted, every step recorded once. `cargo xtask chaos --kill-resume N` is the long
//! version.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The shared chaos config.
fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/chaos/kill-resume.toml")
}

/// Starts `agentrl train` on the chaos config in `run_dir`.
fn start(run_dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["train", "--config"])
        .arg(config())
        .arg("--run-dir")
        .arg(run_dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentrl starts")
}

/// Waits for `child` to exit, failing the test with its stderr when it fails.
fn finish(child: Child, what: &str) {
    let out = child.wait_with_output().expect("agentrl runs");
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `rl_step` records of a run, without the fields that measure time or depend on how the
/// engine's caches happened to be used.
fn rl_records(run_dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "rl_step")
        .map(|mut r| {
            if let Some(fields) = r.as_object_mut() {
                fields.retain(|key, _| !is_timing(key));
            }
            r
        })
        .collect()
}

/// Fields that measure time or the engine's cache use.
fn is_timing(key: &str) -> bool {
    key.contains("seconds")
        || key.contains("per_second")
        || matches!(
            key,
            "prefill_tokens" | "reused_tokens" | "kv_evictions" | "session_cache_mib"
        )
}

/// The final weights of a run.
fn final_weights(run_dir: &Path) -> Vec<u8> {
    let latest: Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("checkpoints/latest.json")).expect("latest.json"),
    )
    .expect("latest.json is JSON");
    let file = latest["file"].as_str().expect("latest names a file");
    std::fs::read(run_dir.join("checkpoints").join(file)).expect("the final weights")
}

/// Steps recorded so far.
fn steps_recorded(run_dir: &Path) -> usize {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .map(|t| t.matches("\"rl_step\"").count())
        .unwrap_or(0)
}

#[test]
fn a_run_killed_three_times_ends_as_if_never_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    finish(start(&whole), "the uninterrupted run");

    let killed = dir.path().join("killed");
    // Kill after the n-th step's record, `delay` later: right after a record lands the
    // learner is writing that step's checkpoint, later it is rolling out the next step.
    let kills = [(2, 0), (5, 40), (8, 150)];
    for (after_step, delay_ms) in kills {
        let mut child = start(&killed);
        let deadline = Instant::now() + Duration::from_secs(600);
        while steps_recorded(&killed) < after_step {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the run exited ({status}) before step {after_step}");
            }
            assert!(
                Instant::now() < deadline,
                "no progress to step {after_step}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
    }
    finish(start(&killed), "the resumed run");

    let (want, got) = (rl_records(&whole), rl_records(&killed));
    let steps: Vec<u64> = got.iter().filter_map(|r| r["step"].as_u64()).collect();
    assert_eq!(steps, (1..=12).collect::<Vec<u64>>(), "every step once");
    if let Some((w, g)) = want.iter().zip(&got).find(|(w, g)| w != g) {
        let differing: Vec<&String> = w
            .as_object()
            .map(|o| {
                o.keys()
                    .filter(|k| w[k.as_str()] != g[k.as_str()])
                    .collect()
            })
            .unwrap_or_default();
        panic!(
            "step {} differs from the uninterrupted run in {differing:?}",
            w["step"]
        );
    }
    assert_eq!(got.len(), want.len(), "as many steps");
    assert!(
        final_weights(&whole) == final_weights(&killed),
        "the same weights, bit for bit"
    );
}
