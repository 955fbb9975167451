//! The short chaos run of CI (`cargo xtask chaos` is the long one): `agentrl train` on
//! arith-calc served by two real `agentrl env-server` processes behind `agentrl controller`,
//! one server answering late and cutting answers off, the other letting env steps hang past
//! the trainer's request timeout, and the first one killed with SIGKILL mid-run and restarted.
//! The run must finish with every step recorded once, every episode of every batch counted
//! under its outcome, env errors kept out of the update, and no group trained twice.

use std::collections::BTreeSet;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentrl_trainer::metrics::read_metrics;

/// Groups per step and episodes per group of the run.
const TASKS_PER_STEP: u64 = 2;
/// Episodes per group.
const GROUP_SIZE: u64 = 3;
/// RL steps.
const STEPS: u64 = 4;

/// Kills every process it holds when dropped, so a failing test leaves none behind.
#[derive(Default)]
struct Processes(Vec<(String, Child)>);

impl Processes {
    fn spawn(&mut self, name: &str, args: &[String], log: &Path) -> &mut Child {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_agentrl"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_string(), child));
        &mut self.0.last_mut().unwrap().1
    }

    fn get(&mut self, name: &str) -> &mut Child {
        &mut self.0.iter_mut().find(|(n, _)| n == name).unwrap().1
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn count(log: &Path, needle: &str) -> usize {
    fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains(needle)).count())
        .unwrap_or(0)
}

/// Waits until `needle` is on `times` lines of `log`; panics with the log after 120 s or once
/// the process ended.
fn wait_for(log: &Path, needle: &str, times: usize, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(log, needle) < times {
        let ended = child.try_wait().unwrap();
        if ended.is_some() || Instant::now() > deadline {
            panic!(
                "no `{needle}` (x{times}); process ended: {ended:?}; log:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config(controller: Option<&str>) -> String {
    let env = match controller {
        None => "[env]\nid = \"arith-calc\"\n".to_string(),
        Some(url) => {
            format!("[env]\nid = \"arith-calc\"\nserver = \"{url}\"\ntimeout_secs = 3\n")
        }
    };
    format!(
        r#"seed = 3
torch_threads = 1
{env}
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 160
ffn_mult = 2
[sft]
demos = 64
steps = 20
batch_size = 8
lr = 3e-3
[sft.demonstrator]
tool_prob_two_operands = 1.0
tool_prob_three_operands = 1.0
copy_error_prob = 0.0
[rl]
steps = {STEPS}
tasks_per_step = {TASKS_PER_STEP}
group_size = {GROUP_SIZE}
lr = 1e-3
max_new_tokens = 24
checkpoint_every = 1
[pipeline]
max_staleness = 1
max_batch = 64
[eval]
tasks = 2
max_new_tokens = 24
"#
    )
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn training_survives_a_fleet_that_dies_drops_delays_and_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut procs = Processes::default();

    // The controller, and two env servers that fail on purpose.
    let ctl_port = free_port();
    let controller = format!("http://127.0.0.1:{ctl_port}");
    let ctl_log = dir.join("controller.log");
    let ctl_args = strings(&["controller", "--addr", &format!("127.0.0.1:{ctl_port}")]);
    let child = procs.spawn("controller", &ctl_args, &ctl_log);
    wait_for(&ctl_log, "controller listening", 1, child);
    let server = |port: u16, faults: &[&str]| -> Vec<String> {
        let mut args = strings(&["env-server", "--env", "arith-calc", "--controller"]);
        args.push(controller.clone());
        args.push("--addr".into());
        args.push(format!("127.0.0.1:{port}"));
        args.extend(strings(faults));
        args
    };
    // Server a: every 3rd step answered late, every 4th answer cut off.
    let a_args = server(
        free_port(),
        &[
            "--chaos-delay-every=3",
            "--chaos-delay-ms=200",
            "--chaos-drop-every=4",
        ],
    );
    // Server b: every 6th step hangs 6 s, past the trainer's 3 s timeout.
    let b_args = server(
        free_port(),
        &["--chaos-hang-every=6", "--chaos-hang-ms=6000"],
    );
    let (a_log, b_log) = (dir.join("a.log"), dir.join("b.log"));
    let child = procs.spawn("a", &a_args, &a_log);
    wait_for(&a_log, "registered with the controller", 1, child);
    let child = procs.spawn("b", &b_args, &b_log);
    wait_for(&b_log, "registered with the controller", 1, child);

    // SFT with the env in process, so the policy calls the calculator and rewards differ.
    let sft_config = dir.join("sft.toml");
    fs::write(&sft_config, config(None)).unwrap();
    let sft_dir = dir.join("sft");
    let sft = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["--quiet", "sft", "--config"])
        .arg(&sft_config)
        .arg("--run-dir")
        .arg(&sft_dir)
        .output()
        .unwrap();
    assert!(
        sft.status.success(),
        "{}",
        String::from_utf8_lossy(&sft.stderr)
    );
    let init = sft_dir.join("checkpoints").join("sft.safetensors");
    assert!(init.is_file());

    // RL against the controller; server a dies (SIGKILL) after the first step and comes back.
    let rl_config = dir.join("chaos.toml");
    fs::write(&rl_config, config(Some(&controller))).unwrap();
    let run_dir = dir.join("run");
    let train_log = dir.join("train.log");
    let train_args: Vec<String> = vec![
        "train".into(),
        "--config".into(),
        path(&rl_config),
        "--run-dir".into(),
        path(&run_dir),
        "--init".into(),
        path(&init),
    ];
    procs.spawn("train", &train_args, &train_log);
    let metrics = run_dir.join("metrics.jsonl");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut killed = false;
    let status = loop {
        if let Some(status) = procs.get("train").try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the run did not finish; log:\n{}",
            fs::read_to_string(&train_log).unwrap_or_default()
        );
        if !killed && count(&metrics, "\"rl_step\"") >= 1 {
            let a = procs.get("a");
            a.kill().unwrap();
            a.wait().unwrap();
            killed = true;
            std::thread::sleep(Duration::from_millis(300));
            let child = procs.spawn("a", &a_args, &a_log);
            wait_for(&a_log, "registered with the controller", 2, child);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = fs::read_to_string(&train_log).unwrap_or_default();
    assert!(status.success(), "the run failed: {status}; log:\n{log}");
    assert!(killed, "the run ended before a server could be killed");

    // Every step once, every episode of its batch under one outcome, env errors not trained.
    let records: Vec<serde_json::Value> = read_metrics(&metrics)
        .unwrap()
        .into_iter()
        .filter(|r| r["kind"] == "rl_step")
        .collect();
    let steps: Vec<u64> = records.iter().filter_map(|r| r["step"].as_u64()).collect();
    assert_eq!(steps, (1..=STEPS).collect::<Vec<_>>());
    let batch = TASKS_PER_STEP * GROUP_SIZE;
    let mut groups = BTreeSet::new();
    let mut env_errors = 0;
    for r in &records {
        let outcomes = r["outcomes"].as_object().unwrap();
        for key in [
            "completed",
            "truncated",
            "invalid_action",
            "env_error",
            "cancelled",
        ] {
            assert!(outcomes[key].is_u64(), "{key} missing in {r}");
        }
        let total: u64 = outcomes.values().filter_map(|v| v.as_u64()).sum();
        assert_eq!(total, batch, "{r}");
        let errors = outcomes["env_error"].as_u64().unwrap();
        env_errors += errors;
        assert_eq!(r["env_error_masked"].as_u64(), Some(errors), "{r}");
        let trained = r["trained_trajectories"].as_u64().unwrap();
        assert!(trained + errors <= batch, "{r}");
        let ids: Vec<u64> = r["group_ids"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_u64())
            .collect();
        assert_eq!(ids.len() as u64, TASKS_PER_STEP, "{r}");
        for id in ids {
            assert!(groups.insert(id), "group {id} trained twice");
        }
        // The step's samples hold exactly its groups' episodes.
        let step = r["step"].as_u64().unwrap();
        let samples = run_dir
            .join("samples")
            .join(format!("rl_step_{step:06}.jsonl"));
        let (trajectories, bad) = agentrl_core::read_jsonl(&samples).unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(trajectories.len() as u64, batch);
        let in_samples: BTreeSet<u64> = trajectories.iter().map(|t| t.group_id).collect();
        let in_record: BTreeSet<u64> = r["group_ids"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_u64())
            .collect();
        assert_eq!(in_samples, in_record, "step {step}");
        let sample_errors = trajectories
            .iter()
            .filter(|t| t.outcome == agentrl_core::Outcome::EnvError)
            .count() as u64;
        assert_eq!(sample_errors, errors);
    }

    let (delays, drops, hangs) = (
        count(&a_log, "chaos: delayed"),
        count(&a_log, "chaos: dropped"),
        count(&b_log, "chaos: hung"),
    );
    eprintln!(
        "chaos run: {} episodes in {STEPS} steps, {env_errors} env errors; {delays} delays, \
         {drops} drops, {hangs} hangs, 1 server killed and restarted",
        batch * STEPS
    );
    // The faults happened, and the env failures they caused were counted.
    assert!(delays >= 1, "no delay injected");
    assert!(drops >= 1, "no answer dropped");
    assert!(hangs >= 1, "no step hung");
    assert!(env_errors >= 1, "no env error counted: {records:?}");
}

fn path(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}
