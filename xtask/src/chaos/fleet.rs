//! `cargo xtask chaos` (the env fleet): a real short training run on `arith-calc` served by
//! several `agentrl env-server` processes behind one `agentrl controller`, while this script
//! kills a server with SIGKILL every few seconds and restarts it on the same address, and the
//! servers themselves (their opt-in `--chaos-*` flags) answer some steps late, cut some answers
//! off and let some env steps hang past the trainer's request timeout.
//!
//! First a short SFT (env in process) gives a policy that calls the calculator, so episodes
//! last several turns and groups have rewards that differ. Then `agentrl train` runs against
//! the controller. At the end it reads `metrics.jsonl` (each step's `outcomes`,
//! `env_error_masked`, `trained_trajectories` and `group_ids`), the step samples and the
//! processes' logs, prints the counts and checks that the run finished, that every step is
//! recorded once with its whole batch accounted for under an outcome, that env errors were not
//! trained on and that no group was trained twice. Everything lands in `runs/chaos/`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::{count_lines, free_port, log_file, wait_for, write};
use crate::{Failure, Result, section};
use serde_json::Value as Json;

/// Env every server serves.
const ENV: &str = "arith-calc";

/// Groups per RL step and episodes per group of the chaos run.
const TASKS_PER_STEP: u64 = 4;
/// Episodes per group.
const GROUP_SIZE: u64 = 4;

/// The trainer's wait for one env request; hung steps outlast it.
const REQUEST_TIMEOUT_SECS: u64 = 4;

/// How long a delayed answer waits.
const DELAY_MS: u64 = 300;

/// How long a hung env step waits (well past [`REQUEST_TIMEOUT_SECS`]).
const HANG_MS: u64 = 10_000;

/// How long a killed server stays down before it is restarted.
const DOWN: Duration = Duration::from_secs(1);

/// What `chaos` was asked for.
#[derive(Debug, Clone)]
struct FleetArgs {
    servers: usize,
    kill_every: u64,
    steps: u64,
    max_seconds: u64,
    delay_every: u64,
    drop_every: u64,
    hang_every: u64,
}

/// `cargo xtask chaos` (fleet part): the options are in [`parse`].
pub fn run_fleet(root: &Path, args: &[OsString]) -> Result<()> {
    let args = parse(args)?;
    let exe = crate::build_agentrl(root)?;
    let dir = root.join("runs").join("chaos");
    if dir.exists() {
        fs::remove_dir_all(&dir)
            .map_err(|e| Failure::new(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let logs = dir.join("logs");
    fs::create_dir_all(&logs)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", logs.display())))?;

    section("chaos: SFT warm start (env in process)");
    let sft_config = write(&dir.join("sft.toml"), &config_text(&args, None))?;
    let sft_dir = dir.join("sft");
    let mut sft = Command::new(&exe);
    sft.current_dir(root)
        .args(["--quiet", "sft", "--config"])
        .arg(&sft_config)
        .arg("--run-dir")
        .arg(&sft_dir)
        .stdout(log_file(&logs.join("sft.log"))?)
        .stderr(log_file(&logs.join("sft.log"))?);
    crate::run("agentrl sft", &mut sft)?;
    let init = sft_dir.join("checkpoints").join("sft.safetensors");
    if !init.is_file() {
        return Err(Failure::new(format!(
            "SFT finished but wrote no {}; see {}",
            init.display(),
            logs.join("sft.log").display()
        )));
    }

    section(&format!(
        "chaos: controller and {} env servers ({})",
        args.servers,
        fault_flags(&args).join(" ")
    ));
    let mut fleet = Fleet::start(&exe, &logs, &args)?;
    let result = train_under_chaos(&exe, root, &dir, &init, &args, &mut fleet);
    // The last restart may still be registering: let it, so the counts are complete.
    for k in 0..fleet.servers.len() {
        if let Err(e) = fleet.await_registration(k) {
            println!("warning: {}", e.message);
        }
    }
    fleet.stop();
    let run = result?;
    report(&dir, &logs, &args, &fleet, &run)
}

/// Reads the options; every one takes a whole number.
fn parse(args: &[OsString]) -> Result<FleetArgs> {
    let mut out = FleetArgs {
        servers: 3,
        kill_every: 3,
        steps: 100,
        max_seconds: 1800,
        delay_every: 5,
        drop_every: 23,
        hang_every: 61,
    };
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| Failure::new(format!("chaos: {flag} needs a value")))?;
        let n = value
            .parse::<u64>()
            .map_err(|_| Failure::new(format!("chaos: {flag} {value:?} is not a whole number")))?;
        match flag.as_str() {
            "--servers" => out.servers = usize::try_from(n).unwrap_or(usize::MAX),
            "--kill-every" => out.kill_every = n,
            "--steps" => out.steps = n,
            "--fleet-seconds" => out.max_seconds = n,
            "--delay-every" => out.delay_every = n,
            "--drop-every" => out.drop_every = n,
            "--hang-every" => out.hang_every = n,
            _ => {
                return Err(Failure::new(format!(
                    "chaos: unknown option {flag}; use --servers N, --kill-every SECS, \
                     --steps N, --fleet-seconds N, --delay-every N, --drop-every N, \
                     --hang-every N"
                )));
            }
        }
    }
    if out.servers < 2 {
        return Err(Failure::new(
            "chaos: --servers must be at least 2 (one is always down while another restarts)",
        ));
    }
    if out.kill_every == 0 || out.steps == 0 || out.max_seconds == 0 {
        return Err(Failure::new(
            "chaos: --kill-every, --steps and --fleet-seconds must be positive",
        ));
    }
    Ok(out)
}

/// The run config: SFT with the env in process (`controller` None), or RL against the
/// controller with a short request timeout.
fn config_text(args: &FleetArgs, controller: Option<&str>) -> String {
    let env = match controller {
        None => format!("[env]\nid = \"{ENV}\"\n"),
        Some(url) => format!(
            "[env]\nid = \"{ENV}\"\nserver = \"{url}\"\ntimeout_secs = {REQUEST_TIMEOUT_SECS}\n"
        ),
    };
    format!(
        r#"# `cargo xtask chaos`: a short run against a fleet of env servers that fail on purpose.
seed = 0
torch_threads = 1

{env}
[model]
d_model = 64
n_layers = 2
n_heads = 4
max_seq_len = 160
ffn_mult = 2

[sft]
demos = 1500
steps = 250
batch_size = 16
lr = 3e-3

[sft.demonstrator]
tool_prob_two_operands = 0.7
tool_prob_three_operands = 1.0
copy_error_prob = 0.1

[rl]
steps = {steps}
tasks_per_step = {TASKS_PER_STEP}
group_size = {GROUP_SIZE}
lr = 3e-4
max_new_tokens = 40
# Every step's samples are kept, so the check can see each trained group.
checkpoint_every = 1

[pipeline]
max_staleness = 1
max_batch = 64

[eval]
tasks = 8
max_new_tokens = 40

[reward]
type = "weighted_sum"

[[reward.terms]]
weight = 1.0
reward = {{ type = "outcome" }}

[[reward.terms]]
weight = 0.1
reward = {{ type = "format" }}
"#,
        steps = args.steps
    )
}

/// The `--chaos-*` flags every env server gets.
fn fault_flags(args: &FleetArgs) -> Vec<String> {
    vec![
        format!("--chaos-delay-every={}", args.delay_every),
        format!("--chaos-delay-ms={DELAY_MS}"),
        format!("--chaos-drop-every={}", args.drop_every),
        format!("--chaos-hang-every={}", args.hang_every),
        format!("--chaos-hang-ms={HANG_MS}"),
    ]
}

/// One env server: its address, log and (while up) process.
struct Server {
    port: u16,
    log: PathBuf,
    child: Option<Child>,
    /// Times it was started (the first start included).
    starts: usize,
}

/// The controller and the env servers, and what was done to them.
struct Fleet {
    exe: PathBuf,
    controller: Child,
    controller_url: String,
    servers: Vec<Server>,
    flags: Vec<String>,
    /// Servers killed with SIGKILL.
    killed: usize,
    /// Server processes that exited by themselves while they should have been serving.
    died: usize,
}

impl Fleet {
    /// Starts the controller and the servers and waits until every server has registered.
    fn start(exe: &Path, logs: &Path, args: &FleetArgs) -> Result<Fleet> {
        let port = free_port()?;
        let controller_log = logs.join("controller.log");
        let controller = Command::new(exe)
            .args(["controller", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--heartbeat-timeout-secs", "5", "--session-ttl-secs", "120"])
            .stdin(Stdio::null())
            .stdout(log_file(&controller_log)?)
            .stderr(log_file(&controller_log)?)
            .spawn()
            .map_err(|e| Failure::new(format!("cannot start the controller: {e}")))?;
        let mut fleet = Fleet {
            exe: exe.to_path_buf(),
            controller,
            controller_url: format!("http://127.0.0.1:{port}"),
            servers: Vec::new(),
            flags: fault_flags(args),
            killed: 0,
            died: 0,
        };
        wait_for(&controller_log, "controller listening", 1, || {
            fleet_alive(&mut fleet.controller)
        })
        .map_err(|e| Failure::new(format!("the controller did not start: {e}")))?;
        for k in 0..args.servers {
            let server = Server {
                port: free_port()?,
                log: logs.join(format!("server-{k}.log")),
                child: None,
                starts: 0,
            };
            fleet.servers.push(server);
            fleet.spawn(k)?;
        }
        for k in 0..args.servers {
            fleet.await_registration(k)?;
        }
        Ok(fleet)
    }

    /// Starts server `k` (again) on its address.
    fn spawn(&mut self, k: usize) -> Result<()> {
        let server = &mut self.servers[k];
        let child = Command::new(&self.exe)
            .args(["env-server", "--env", ENV])
            .args(["--addr", &format!("127.0.0.1:{}", server.port)])
            .args(["--controller", &self.controller_url])
            .args(["--session-ttl-secs", "120"])
            .args(&self.flags)
            .stdin(Stdio::null())
            .stdout(log_file(&server.log)?)
            .stderr(log_file(&server.log)?)
            .spawn()
            .map_err(|e| Failure::new(format!("cannot start env server {k}: {e}")))?;
        server.child = Some(child);
        server.starts += 1;
        Ok(())
    }

    /// Waits until server `k` has registered as often as it was started.
    fn await_registration(&mut self, k: usize) -> Result<()> {
        let server = &mut self.servers[k];
        let (log, starts) = (server.log.clone(), server.starts);
        let child = server.child.as_mut();
        let mut alive = child.map(|c| move || fleet_alive(c));
        wait_for(&log, "registered with the controller", starts, || {
            alive.as_mut().is_some_and(|f| f())
        })
        .map_err(|e| Failure::new(format!("env server {k} did not register: {e}")))
    }

    /// Kills server `k` with SIGKILL (if it runs).
    fn kill(&mut self, k: usize) {
        if let Some(mut child) = self.servers[k].child.take() {
            match child.try_wait() {
                Ok(None) => {
                    // Already gone is fine: then it is reaped below.
                    let _ = child.kill();
                    self.killed += 1;
                }
                _ => self.died += 1,
            }
            let _ = child.wait();
        }
    }

    /// Restarts every server whose process ended by itself (counted in `died`).
    fn revive(&mut self) -> Result<()> {
        for k in 0..self.servers.len() {
            let ended = match self.servers[k].child.as_mut() {
                Some(child) => !fleet_alive(child),
                None => false,
            };
            if ended {
                self.servers[k].child = None;
                self.died += 1;
                self.spawn(k)?;
            }
        }
        Ok(())
    }

    /// Stops every process of the fleet.
    fn stop(&mut self) {
        for server in &mut self.servers {
            if let Some(mut child) = server.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = self.controller.kill();
        let _ = self.controller.wait();
    }
}

/// Whether `child` is still running.
fn fleet_alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

/// How the training run went.
struct TrainRun {
    finished: bool,
    seconds: f64,
    run_dir: PathBuf,
    log: PathBuf,
}

/// Runs `agentrl train` against the fleet, killing and restarting a server every
/// `kill_every` seconds (round robin) until the trainer exits or the time limit passes.
fn train_under_chaos(
    exe: &Path,
    root: &Path,
    dir: &Path,
    init: &Path,
    args: &FleetArgs,
    fleet: &mut Fleet,
) -> Result<TrainRun> {
    let config = write(
        &dir.join("chaos.toml"),
        &config_text(args, Some(&fleet.controller_url)),
    )?;
    let run_dir = dir.join("run");
    let log = dir.join("logs").join("train.log");
    section(&format!(
        "chaos: agentrl train, {} RL steps, a server killed every {} s (at most {} s)",
        args.steps, args.kill_every, args.max_seconds
    ));
    let mut trainer = Command::new(exe)
        .current_dir(root)
        .args(["train", "--config"])
        .arg(&config)
        .arg("--run-dir")
        .arg(&run_dir)
        .arg("--init")
        .arg(init)
        .stdin(Stdio::null())
        .stdout(log_file(&log)?)
        .stderr(log_file(&log)?)
        .spawn()
        .map_err(|e| Failure::new(format!("cannot start the trainer: {e}")))?;
    let started = Instant::now();
    let limit = Duration::from_secs(args.max_seconds);
    let every = Duration::from_secs(args.kill_every);
    let mut next_kill = started + every;
    let mut victim = 0;
    let mut last_note = Instant::now();
    let finished = loop {
        match trainer.try_wait() {
            Ok(Some(status)) => {
                println!("trainer exited: {status}");
                break status.success();
            }
            Ok(None) => {}
            Err(e) => return Err(Failure::new(format!("cannot wait for the trainer: {e}"))),
        }
        if started.elapsed() > limit {
            println!(
                "time limit of {} s reached: stopping the trainer",
                args.max_seconds
            );
            let _ = trainer.kill();
            let _ = trainer.wait();
            break false;
        }
        if Instant::now() >= next_kill {
            fleet.kill(victim);
            std::thread::sleep(DOWN);
            fleet.spawn(victim)?;
            victim = (victim + 1) % fleet.servers.len();
            next_kill = Instant::now() + every;
        }
        fleet.revive()?;
        if last_note.elapsed() >= Duration::from_secs(30) {
            last_note = Instant::now();
            println!(
                "{:>5.0} s: {} RL steps recorded, {} servers killed",
                started.elapsed().as_secs_f64(),
                count_lines(&run_dir.join("metrics.jsonl"), "\"rl_step\""),
                fleet.killed
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Ok(TrainRun {
        finished,
        seconds: started.elapsed().as_secs_f64(),
        run_dir,
        log,
    })
}

/// One `rl_step` record, as far as the checks need it.
#[derive(Debug, Default)]
struct StepRecord {
    step: u64,
    outcomes: BTreeMap<String, u64>,
    env_error_masked: u64,
    trained: u64,
    dropped_stale: u64,
    group_ids: Vec<u64>,
}

/// The `rl_step` records of `metrics.jsonl`.
fn read_steps(path: &Path) -> Result<Vec<StepRecord>> {
    let mut steps = Vec::new();
    for record in crate::procs::rl_step_records(path)? {
        let number = |key: &str| record.get(key).and_then(Json::as_u64).unwrap_or(0);
        steps.push(StepRecord {
            step: number("step"),
            outcomes: record
                .get("outcomes")
                .and_then(Json::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default(),
            env_error_masked: number("env_error_masked"),
            trained: number("trained_trajectories"),
            dropped_stale: number("dropped_stale"),
            group_ids: record
                .get("group_ids")
                .and_then(Json::as_array)
                .map(|ids| ids.iter().filter_map(Json::as_u64).collect())
                .unwrap_or_default(),
        });
    }
    Ok(steps)
}

/// The trajectories of one step's samples file: `(group id, outcome)` each.
fn read_samples(path: &Path) -> Result<Vec<(u64, String)>> {
    let text = fs::read_to_string(path)
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let t = serde_json::from_str::<Json>(line)
                .map_err(|e| Failure::new(format!("{} line {}: {e}", path.display(), i + 1)))?;
            let group = t.get("group_id").and_then(Json::as_u64).ok_or_else(|| {
                Failure::new(format!("{} line {}: no group_id", path.display(), i + 1))
            })?;
            let outcome = t
                .get("outcome")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .to_string();
            Ok((group, outcome))
        })
        .collect()
}

/// Prints the counts and the checks; fails when a check fails.
fn report(dir: &Path, logs: &Path, args: &FleetArgs, fleet: &Fleet, run: &TrainRun) -> Result<()> {
    section("chaos: counts");
    let steps = read_steps(&run.run_dir.join("metrics.jsonl"))?;
    let batch = TASKS_PER_STEP * GROUP_SIZE;
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for s in &steps {
        for (k, v) in &s.outcomes {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    let episodes: u64 = totals.values().sum();
    let env_errors = totals.get("env_error").copied().unwrap_or(0);
    let masked: u64 = steps.iter().map(|s| s.env_error_masked).sum();
    let trained: u64 = steps.iter().map(|s| s.trained).sum();
    let stale: u64 = steps.iter().map(|s| s.dropped_stale).sum();
    let server_logs: Vec<PathBuf> = fleet.servers.iter().map(|s| s.log.clone()).collect();
    let in_servers =
        |needle: &str| -> usize { server_logs.iter().map(|l| count_lines(l, needle)).sum() };
    let registrations = in_servers("registered with the controller");
    let starts: usize = fleet.servers.iter().map(|s| s.starts).sum();
    let restarts = starts - fleet.servers.len();
    let delays = in_servers("chaos: delayed");
    let drops = in_servers("chaos: dropped");
    let hangs = in_servers("chaos: hung");
    let env_error_warnings = count_lines(&run.log, "env reset failed");

    println!(
        "trainer: {} after {:.0} s; {} of {} RL steps recorded",
        if run.finished {
            "finished"
        } else {
            "did NOT finish"
        },
        run.seconds,
        steps.len(),
        args.steps
    );
    println!(
        "episodes in training batches: {episodes} ({} steps x {TASKS_PER_STEP} groups x \
         {GROUP_SIZE})",
        steps.len()
    );
    for (outcome, n) in &totals {
        println!("  {outcome:<15} {n}");
    }
    println!(
        "trained on: {trained} trajectories; env errors masked out of the update: {masked}; \
         episodes dropped as stale: {stale}"
    );
    println!(
        "fleet: {} servers; {} killed with SIGKILL, {restarts} restarts, {registrations} \
         registrations (first starts included), {} died by themselves",
        fleet.servers.len(),
        fleet.killed,
        fleet.died
    );
    println!(
        "faults injected by the servers: {delays} delayed answers ({DELAY_MS} ms), {drops} \
         dropped answers, {hangs} hung env steps ({HANG_MS} ms, trainer timeout \
         {REQUEST_TIMEOUT_SECS} s)"
    );
    println!("trainer warnings about env resets that failed: {env_error_warnings}");

    section("chaos: checks");
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        println!("  [{}] {what}", if ok { "ok" } else { "FAIL" });
        if !ok {
            problems.push(what);
        }
    };
    check(run.finished, "the training run finished".into());
    let numbers: Vec<u64> = steps.iter().map(|s| s.step).collect();
    let want: Vec<u64> = (1..=args.steps).collect();
    check(
        numbers == want,
        format!("every RL step 1..={} recorded exactly once", args.steps),
    );
    let short: Vec<u64> = steps
        .iter()
        .filter(|s| s.outcomes.values().sum::<u64>() != batch)
        .map(|s| s.step)
        .collect();
    check(
        short.is_empty(),
        format!(
            "each step's outcome counts add up to its batch of {batch} episodes{}",
            list(&short)
        ),
    );
    let overtrained: Vec<u64> = steps
        .iter()
        .filter(|s| {
            let errors = s.outcomes.get("env_error").copied().unwrap_or(0);
            s.env_error_masked != errors || s.trained + errors > batch
        })
        .map(|s| s.step)
        .collect();
    check(
        overtrained.is_empty(),
        format!(
            "env errors masked out of every update{}",
            list(&overtrained)
        ),
    );
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    let mut twice = BTreeSet::new();
    let mut wrong_count = Vec::new();
    for s in &steps {
        if s.group_ids.len() as u64 != TASKS_PER_STEP {
            wrong_count.push(s.step);
        }
        for g in &s.group_ids {
            if seen.insert(*g, s.step).is_some() {
                twice.insert(*g);
            }
        }
    }
    check(
        twice.is_empty() && wrong_count.is_empty(),
        format!(
            "no group trained twice ({} groups, each in one step with {TASKS_PER_STEP} per \
             step){}{}",
            seen.len(),
            list(&twice.iter().copied().collect::<Vec<_>>()),
            list(&wrong_count)
        ),
    );
    let samples_problem = check_samples(&run.run_dir, &steps)?;
    check(
        samples_problem.is_none(),
        format!(
            "the samples of every step hold exactly its groups, {GROUP_SIZE} episodes each{}",
            samples_problem
                .map(|p| format!(": {p}"))
                .unwrap_or_default()
        ),
    );
    check(
        fleet.killed > 0 && registrations >= starts,
        "servers were killed, restarted and registered again".into(),
    );
    check(
        delays > 0 && drops > 0 && hangs > 0,
        "delays, dropped answers and hung steps were injected".into(),
    );
    check(
        env_errors > 0,
        "some episodes ended as env errors (and were counted)".into(),
    );
    println!(
        "\nlogs, configs and the run are under {}; server logs in {}",
        dir.display(),
        logs.display()
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "chaos: {} check(s) failed: {}",
            problems.len(),
            problems.join("; ")
        )))
    }
}

/// ` (steps a, b)` for a non-empty list, else nothing.
fn list(items: &[u64]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let text: Vec<String> = items.iter().map(u64::to_string).collect();
    format!(" (not for: {})", text.join(", "))
}

/// Compares each step's samples file with its record: the same groups, [`GROUP_SIZE`]
/// episodes each, outcomes counted alike. `None` when all agree.
fn check_samples(run_dir: &Path, steps: &[StepRecord]) -> Result<Option<String>> {
    for s in steps {
        let path = run_dir
            .join("samples")
            .join(format!("rl_step_{:06}.jsonl", s.step));
        if !path.is_file() {
            return Ok(Some(format!("{} is missing", path.display())));
        }
        let samples = read_samples(&path)?;
        let mut per_group: BTreeMap<u64, u64> = BTreeMap::new();
        let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
        for (g, outcome) in &samples {
            *per_group.entry(*g).or_default() += 1;
            *outcomes.entry(outcome.clone()).or_default() += 1;
        }
        let groups: BTreeSet<u64> = per_group.keys().copied().collect();
        let recorded: BTreeSet<u64> = s.group_ids.iter().copied().collect();
        if groups != recorded {
            return Ok(Some(format!(
                "step {}: samples hold groups {groups:?}, the record {recorded:?}",
                s.step
            )));
        }
        if let Some((g, n)) = per_group.iter().find(|(_, n)| **n != GROUP_SIZE) {
            return Ok(Some(format!(
                "step {}: group {g} has {n} episodes in the samples",
                s.step
            )));
        }
        let recorded_outcomes: BTreeMap<String, u64> = s
            .outcomes
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect();
        if outcomes != recorded_outcomes {
            return Ok(Some(format!(
                "step {}: samples count outcomes {outcomes:?}, the record {recorded_outcomes:?}",
                s.step
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_are_checked() {
        let args: Vec<OsString> = ["--servers", "4", "--kill-every", "2", "--steps", "7"]
            .iter()
            .map(OsString::from)
            .collect();
        let a = parse(&args).unwrap();
        assert_eq!((a.servers, a.kill_every, a.steps), (4, 2, 7));
        assert!(parse(&[OsString::from("--servers"), OsString::from("1")]).is_err());
        assert!(parse(&[OsString::from("--steps")]).is_err());
        assert!(parse(&[OsString::from("--bogus"), OsString::from("1")]).is_err());
    }

    #[test]
    fn the_rl_config_points_at_the_controller_with_a_timeout() {
        let args = parse(&[]).unwrap();
        let text = config_text(&args, Some("http://127.0.0.1:1"));
        assert!(text.contains("server = \"http://127.0.0.1:1\""));
        assert!(text.contains("timeout_secs = 4"));
        assert!(text.contains("checkpoint_every = 1"));
        assert!(!config_text(&args, None).contains("server = "));
    }
}
