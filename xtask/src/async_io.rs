//! `cargo xtask bench --async-io`: the asynchronous pipeline against the synchronous one on an
//! env with real I/O latency (or, with `--delay-ms 0`, on the env in process: a compute-bound
//! job, where `--threads` sets the libtorch threads of rollout and learner).
//!
//! `arith-calc` is served by an `agentrl env-server` whose every step is answered `--delay-ms`
//! late (its `--chaos-delay-*` flags), as a tool behind a slow API would be. A short SFT (env in
//! process) gives a small GPT the habit of calling the calculator, so episodes last several
//! turns. Then the same RL run, from the same SFT weights, is made synchronous
//! (`max_staleness = 0`: roll out a step's groups, then train, then roll out again) and
//! asynchronous (`max_staleness = --staleness`: the groups of the next steps are rolled out
//! while the learner trains), alternately for `--rounds` rounds. From each run's
//! `metrics.jsonl` (the first step, which pays for start-up, left out) it prints episodes per
//! second, seconds per step and the share of the learner's time spent waiting for rollouts
//! (`trainer_idle_seconds`), and the async/sync throughput ratio per round. Everything lands
//! in `target/async-io/`, the figures in `results.json` there.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::{Value as Json, json};

use crate::procs::{free_port, log_file, rl_step_records, wait_for, write};
use crate::{Failure, Result, section};

/// The env the bench plays.
const ENV: &str = "arith-calc";

/// Groups per RL step.
const TASKS_PER_STEP: u64 = 16;

/// Episodes per group.
const GROUP_SIZE: u64 = 8;

/// What `--async-io` was asked for.
#[derive(Debug, Clone)]
struct Options {
    /// Milliseconds every env step's answer is held back.
    delay_ms: u64,
    /// RL steps per run (the first is not counted).
    steps: u64,
    /// `max_staleness` of the asynchronous runs.
    staleness: u64,
    /// Sync/async pairs.
    rounds: u64,
    /// `torch_threads` of every run (libtorch threads of the rollout and of the learner).
    threads: u64,
}

/// Reads `--delay-ms N`, `--steps N`, `--staleness N`, `--rounds N` and `--threads N`.
fn parse(args: &[OsString]) -> Result<Options> {
    let mut options = Options {
        delay_ms: 500,
        steps: 12,
        staleness: 4,
        rounds: 2,
        threads: 2,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let flag = flag.to_string_lossy();
        let slot = match flag.as_ref() {
            "--delay-ms" => &mut options.delay_ms,
            "--steps" => &mut options.steps,
            "--staleness" => &mut options.staleness,
            "--rounds" => &mut options.rounds,
            "--threads" => &mut options.threads,
            other => {
                return Err(Failure::new(format!(
                    "bench --async-io: unknown option `{other}` (expected --delay-ms, --steps, \
                     --staleness, --rounds or --threads, each with a whole number)"
                )));
            }
        };
        let value = rest
            .next()
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        *slot = value.parse().map_err(|_| {
            Failure::new(format!(
                "bench --async-io: {flag} needs a whole number, got `{value}`"
            ))
        })?;
    }
    if options.steps < 3 {
        return Err(Failure::new(
            "bench --async-io: --steps must be at least 3 (the first step is not counted)",
        ));
    }
    if options.staleness == 0 || options.rounds == 0 || options.threads == 0 {
        return Err(Failure::new(
            "bench --async-io: --staleness, --rounds and --threads must be at least 1",
        ));
    }
    Ok(options)
}

/// `cargo xtask bench --async-io`: see the module and [`parse`].
pub fn cmd_async_io(root: &Path, work: &Path, exe: &Path, args: &[OsString]) -> Result<()> {
    let options = parse(args)?;
    if work.exists() {
        fs::remove_dir_all(work)
            .map_err(|e| Failure::new(format!("cannot clear {}: {e}", work.display())))?;
    }
    let logs = work.join("logs");
    fs::create_dir_all(&logs)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", logs.display())))?;

    section("async-io: SFT warm start (env in process)");
    let sft_config = write(&work.join("sft.toml"), &config_text(&options, None, 0))?;
    let sft_dir = work.join("sft");
    let mut sft = Command::new(exe);
    sft.current_dir(root)
        .args(["--quiet", "sft", "--config"])
        .arg(&sft_config)
        .arg("--run-dir")
        .arg(&sft_dir)
        .stdin(Stdio::null())
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

    let runs = if options.delay_ms == 0 {
        // No latency: the env in process, a compute-bound job.
        run_rounds(root, work, exe, &init, &options, None)?
    } else {
        section(&format!(
            "async-io: env server with every step answered {} ms late",
            options.delay_ms
        ));
        let mut server = EnvServer::start(exe, &logs.join("env-server.log"), options.delay_ms)?;
        let result = run_rounds(root, work, exe, &init, &options, Some(&server.url));
        server.stop();
        result?
    };
    report(work, &options, &runs)
}

/// One measured run.
#[derive(Debug, Clone)]
struct RunFigures {
    mode: &'static str,
    round: u64,
    episodes_per_second: f64,
    seconds_per_step: f64,
    idle_share: f64,
    success_rate: f64,
    turns_mean: f64,
}

/// Runs sync then async, `rounds` times, each from the SFT weights.
fn run_rounds(
    root: &Path,
    work: &Path,
    exe: &Path,
    init: &Path,
    options: &Options,
    server_url: Option<&str>,
) -> Result<Vec<RunFigures>> {
    let mut runs = Vec::new();
    for round in 1..=options.rounds {
        for (mode, staleness) in [("sync", 0), ("async", options.staleness)] {
            let name = format!("{mode}-{round}");
            section(&format!(
                "async-io: round {round}, {mode} (max_staleness = {staleness}), {} RL steps",
                options.steps
            ));
            let config = write(
                &work.join(format!("{name}.toml")),
                &config_text(options, server_url, staleness),
            )?;
            let run_dir = work.join(&name);
            let log = work.join("logs").join(format!("{name}.log"));
            let mut train = Command::new(exe);
            train
                .current_dir(root)
                .args(["--quiet", "train", "--config"])
                .arg(&config)
                .arg("--run-dir")
                .arg(&run_dir)
                .arg("--init")
                .arg(init)
                .stdin(Stdio::null())
                .stdout(log_file(&log)?)
                .stderr(log_file(&log)?);
            let started = Instant::now();
            crate::run(&format!("agentrl train ({name})"), &mut train)?;
            let figures = measure(&run_dir.join("metrics.jsonl"), mode, round)?;
            println!(
                "{name}: {:.1} episodes/s, {:.2} s/step, learner idle {:.0}%, success {:.2}, \
                 {:.1} turns per episode ({:.0} s in all)",
                figures.episodes_per_second,
                figures.seconds_per_step,
                100.0 * figures.idle_share,
                figures.success_rate,
                figures.turns_mean,
                started.elapsed().as_secs_f64()
            );
            runs.push(figures);
        }
    }
    Ok(runs)
}

/// The figures of one run from its `rl_step` records, the first step left out.
fn measure(metrics: &Path, mode: &'static str, round: u64) -> Result<RunFigures> {
    let steps = rl_step_records(metrics)?;
    let counted = steps.get(1..).unwrap_or_default();
    if counted.is_empty() {
        return Err(Failure::new(format!(
            "{} holds fewer than two rl_step records",
            metrics.display()
        )));
    }
    let field = |r: &Json, key: &str| r.get(key).and_then(Json::as_f64).unwrap_or(0.0);
    let sum = |key: &str| counted.iter().map(|r| field(r, key)).sum::<f64>();
    let seconds = sum("step_seconds").max(1e-9);
    // Every episode the step's groups rolled out, trained on or not (a group whose rewards
    // are all equal carries no signal and is not trained on).
    let episodes = sum("groups_drawn") * GROUP_SIZE as f64;
    let n = counted.len() as f64;
    Ok(RunFigures {
        mode,
        round,
        episodes_per_second: episodes / seconds,
        seconds_per_step: seconds / n,
        idle_share: sum("trainer_idle_seconds") / seconds,
        success_rate: sum("success_rate") / n,
        turns_mean: sum("turns_mean") / n,
    })
}

/// Prints the table and the async/sync ratio per round; writes `results.json`.
fn report(work: &Path, options: &Options, runs: &[RunFigures]) -> Result<()> {
    section("async-io: results");
    let env = match options.delay_ms {
        0 => "arith-calc in process (no latency)".to_string(),
        ms => format!("arith-calc on an env server answering every step {ms} ms late"),
    };
    println!(
        "{env}; {} groups x {} episodes per step; {} steps per run, the first not counted; \
         torch_threads = {}",
        TASKS_PER_STEP, GROUP_SIZE, options.steps, options.threads
    );
    println!("| round | mode | episodes/s | s/step | learner idle | success | turns |");
    println!("|---|---|---|---|---|---|---|");
    for r in runs {
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.0}% | {:.2} | {:.1} |",
            r.round,
            r.mode,
            r.episodes_per_second,
            r.seconds_per_step,
            100.0 * r.idle_share,
            r.success_rate,
            r.turns_mean
        );
    }
    let mut ratios = Vec::new();
    for round in 1..=options.rounds {
        let of = |mode: &str| {
            runs.iter()
                .find(|r| r.round == round && r.mode == mode)
                .map(|r| r.episodes_per_second)
        };
        if let (Some(sync), Some(asynchronous)) = (of("sync"), of("async")) {
            let ratio = asynchronous / sync.max(1e-9);
            println!("round {round}: async/sync throughput {ratio:.2}x");
            ratios.push(ratio);
        }
    }
    let results = json!({
        "env": ENV,
        "delay_ms": options.delay_ms,
        "steps": options.steps,
        "staleness": options.staleness,
        "torch_threads": options.threads,
        "tasks_per_step": TASKS_PER_STEP,
        "group_size": GROUP_SIZE,
        "runs": runs.iter().map(|r| json!({
            "round": r.round,
            "mode": r.mode,
            "episodes_per_second": r.episodes_per_second,
            "seconds_per_step": r.seconds_per_step,
            "learner_idle_share": r.idle_share,
            "success_rate": r.success_rate,
            "turns_mean": r.turns_mean,
        })).collect::<Vec<_>>(),
        "async_over_sync": ratios,
    });
    let path = work.join("results.json");
    let text = serde_json::to_string_pretty(&results)
        .map_err(|e| Failure::new(format!("cannot encode the results: {e}")))?;
    write(&path, &text)?;
    println!("results: {}", path.display());
    Ok(())
}

/// The env server every RL run plays against.
struct EnvServer {
    url: String,
    child: Child,
}

impl EnvServer {
    /// Starts `agentrl env-server` on a free port with every step `delay_ms` late and waits
    /// until it listens.
    fn start(exe: &Path, log: &Path, delay_ms: u64) -> Result<Self> {
        let port = free_port()?;
        let mut child = Command::new(exe)
            .args(["env-server", "--env", ENV])
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .args(["--chaos-delay-every", "1"])
            .args(["--chaos-delay-ms", &delay_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file(log)?)
            .stderr(log_file(log)?)
            .spawn()
            .map_err(|e| Failure::new(format!("cannot start the env server: {e}")))?;
        if let Err(e) = wait_for(log, "env server listening", 1, || {
            matches!(child.try_wait(), Ok(None))
        }) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::new(format!("the env server did not start: {e}")));
        }
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            child,
        })
    }

    /// Stops the server.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The run config on `server` (in process when `None`) with `max_staleness` as given: the
/// demo's RL settings, and its tiny GPT made wider and deeper (d_model 256, 4 layers; about
/// 3.2 M weights) so that an update costs about as much as a step's generation, as it does
/// for a real LLM (with the demo's 0.3 M weights the learner's step is start-up overhead).
fn config_text(options: &Options, server: Option<&str>, max_staleness: u64) -> String {
    let env = match server {
        None => format!("[env]\nid = \"{ENV}\"\n"),
        Some(url) => format!("[env]\nid = \"{ENV}\"\nserver = \"{url}\"\ntimeout_secs = 60\n"),
    };
    format!(
        r#"# `cargo xtask bench --async-io`: sync against async on an env with I/O latency.
seed = 0
torch_threads = {threads}

{env}
[model]
d_model = 256
n_layers = 4
n_heads = 8
max_seq_len = 160
ffn_mult = 4

[sft]
demos = 4000
steps = 400
batch_size = 32
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
temperature = 1.0
max_new_tokens = 40
checkpoint_every = 1000

[pipeline]
max_staleness = {max_staleness}
max_batch = 512

[eval]
tasks = 4
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
        steps = options.steps,
        threads = options.threads
    )
}
