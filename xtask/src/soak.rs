//! `cargo xtask soak`: a long `agentrl demo` run (demonstrations, SFT, then RL for many steps)
//! watched from outside. Every 10 s it samples the trainer's resident memory, open file
//! descriptors, threads and child processes from `/proc` (all samples go to
//! `runs/soak/samples.csv`). At the end it reports whether memory stayed flat after warm-up
//! (growth under 10% from the first sample two minutes into RL, when the rollout engine's
//! caches have filled, to the last one),
//! whether descriptors and threads stayed bounded, and whether any process or temporary file
//! outlived the run. The trainer gets a private `TMPDIR`, so sandbox workspaces it leaves
//! behind are visible.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::{Failure, Result, section};

/// How often the trainer is sampled.
const EVERY: Duration = Duration::from_secs(10);

/// How long RL runs before resident memory counts as warmed up.
const WARM_UP: u64 = 120;

/// Growth of resident memory after warm-up that counts as a leak.
const MAX_GROWTH: f64 = 0.10;

/// What `soak` was asked for.
struct SoakArgs {
    config: String,
    steps: u64,
    minutes: u64,
}

/// One sample of the trainer.
#[derive(Debug, Clone, Copy)]
struct Sample {
    seconds: u64,
    rss_kib: u64,
    fds: usize,
    in_rl: bool,
    threads: u64,
    children: usize,
}

/// `cargo xtask soak [--config FILE] [--steps N] [--minutes M]`.
pub fn cmd_soak(root: &Path, exe: &Path, args: &[OsString]) -> Result<()> {
    let args = parse(args)?;
    let run_dir = root.join("runs").join("soak");
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir)
            .map_err(|e| Failure::new(format!("cannot clear {}: {e}", run_dir.display())))?;
    }
    let tmp = run_dir.join("tmp");
    fs::create_dir_all(&tmp)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", tmp.display())))?;
    let config = run_dir.join("soak.toml");
    let base = root.join(&args.config);
    let text = format!(
        "# `cargo xtask soak`: {} with more RL steps.\nbase = {:?}\n\n[rl]\nsteps = {}\ncheckpoint_every = 500\n",
        args.config,
        base.display().to_string(),
        args.steps
    );
    fs::write(&config, text)
        .map_err(|e| Failure::new(format!("cannot write {}: {e}", config.display())))?;
    section(&format!(
        "soak: agentrl demo, {} for {} RL steps (at most {} minutes)",
        args.config, args.steps, args.minutes
    ));
    let mut child = Command::new(exe)
        .current_dir(root)
        .env("TMPDIR", &tmp)
        .args(["--log-format", "json", "demo", "--fresh", "--config"])
        .arg(&config)
        .arg("--run-dir")
        .arg(run_dir.join("run"))
        .stderr(
            fs::File::create(run_dir.join("train.log"))
                .map_err(|e| Failure::new(format!("cannot create the log: {e}")))?,
        )
        .spawn()
        .map_err(|e| Failure::new(format!("cannot start {}: {e}", exe.display())))?;
    let limit = Duration::from_secs(args.minutes * 60);
    let (samples, finished) = watch(&mut child, limit, &run_dir.join("train.log"))?;
    write_csv(&run_dir.join("samples.csv"), &samples)?;
    report(&samples, finished, &tmp, child.id())
}

/// Reads `--config`, `--steps` and `--minutes`.
fn parse(args: &[OsString]) -> Result<SoakArgs> {
    let mut out = SoakArgs {
        config: "configs/demo.toml".into(),
        steps: 1500,
        minutes: 30,
    };
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| Failure::new(format!("soak: {flag} needs a value")))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| Failure::new(format!("soak: {flag} {value:?} is not a number")))
        };
        match flag.as_str() {
            "--config" => out.config = value.clone(),
            "--steps" => out.steps = number()?,
            "--minutes" => out.minutes = number()?,
            _ => {
                return Err(Failure::new(format!(
                    "soak: unknown option {flag}; use --config FILE, --steps N, --minutes M"
                )));
            }
        }
    }
    Ok(out)
}

/// Samples `child` every [`EVERY`] until it exits or `limit` passes (then it is killed);
/// returns the samples and whether it finished by itself with success.
fn watch(child: &mut Child, limit: Duration, log: &Path) -> Result<(Vec<Sample>, bool)> {
    let started = Instant::now();
    let mut samples = Vec::new();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Failure::new(format!("cannot wait for the trainer: {e}")))?
        {
            println!("trainer exited: {status}");
            return Ok((samples, status.success()));
        }
        if started.elapsed() >= limit {
            println!("time limit reached: stopping the trainer");
            // Already gone is fine; the samples say what happened.
            let _ = child.kill();
            let _ = child.wait();
            return Ok((samples, false));
        }
        if let Some(mut sample) = sample(child.id(), started.elapsed().as_secs()) {
            sample.in_rl = samples.last().is_some_and(|s: &Sample| s.in_rl) || rl_started(log);
            if samples.len() % 6 == 0 {
                println!(
                    "{:>6} s  rss {:>8} KiB  fds {:>4}  threads {:>3}  children {:>3}",
                    sample.seconds, sample.rss_kib, sample.fds, sample.threads, sample.children
                );
            }
            samples.push(sample);
        }
        std::thread::sleep(EVERY);
    }
}

/// One sample of process `pid` from `/proc` (None once it is gone).
fn sample(pid: u32, seconds: u64) -> Option<Sample> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample {
        seconds,
        rss_kib: field("VmRSS:")?,
        fds,
        in_rl: false,
        threads: field("Threads:")?,
        children: descendants(pid).len(),
    })
}

/// Whether the trainer's log shows an RL step.
fn rl_started(log: &Path) -> bool {
    fs::read_to_string(log).is_ok_and(|text| text.contains("rl step "))
}

/// Processes whose parent chain reaches `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|p| {
            let stat = fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // The parent pid is the second field after the parenthesised command name.
            let after = stat.rsplit_once(')')?.1;
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Prints the verdicts; fails when memory grew, or something outlived a finished run.
fn report(samples: &[Sample], finished: bool, tmp: &Path, pid: u32) -> Result<()> {
    section("soak: summary");
    let Some(last) = samples.last() else {
        return Err(Failure::new("the trainer exited before the first sample"));
    };
    let rl_start = samples.iter().find(|s| s.in_rl).map(|s| s.seconds);
    let Some(warm) = rl_start
        .and_then(|start| samples.iter().find(|s| s.seconds >= start + WARM_UP))
        .copied()
    else {
        return Err(Failure::new(format!(
            "RL did not run for {WARM_UP} s within the soak; give it more --minutes"
        )));
    };
    let peak_rss = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let growth = last.rss_kib as f64 / warm.rss_kib.max(1) as f64 - 1.0;
    let range = |f: fn(&Sample) -> u64| {
        let values = samples.iter().map(f);
        (values.clone().min().unwrap_or(0), values.max().unwrap_or(0))
    };
    let (fd_lo, fd_hi) = range(|s| s.fds as u64);
    let (th_lo, th_hi) = range(|s| s.threads);
    let (ch_lo, ch_hi) = range(|s| s.children as u64);
    println!(
        "samples: {} over {} s (every {} s); finished by itself: {finished}",
        samples.len(),
        last.seconds,
        EVERY.as_secs()
    );
    println!(
        "resident memory: {} MiB after warm-up ({} s, {WARM_UP} s into RL), {} MiB peak, {} MiB \
         last: {:+.1}%",
        warm.rss_kib / 1024,
        warm.seconds,
        peak_rss / 1024,
        last.rss_kib / 1024,
        growth * 100.0
    );
    println!(
        "open descriptors: {fd_lo}..{fd_hi}; threads: {th_lo}..{th_hi}; children: {ch_lo}..{ch_hi}"
    );
    let left_files = leftovers(tmp);
    let left_procs = descendants(pid);
    println!(
        "after the run: {} entries left in its TMPDIR {}, {} processes left",
        left_files.len(),
        if left_files.is_empty() {
            String::new()
        } else {
            format!("{left_files:?}")
        },
        left_procs.len()
    );
    let mut problems = Vec::new();
    if growth > MAX_GROWTH {
        problems.push(format!(
            "resident memory grew {:.1}% after warm-up (limit {:.0}%)",
            growth * 100.0,
            MAX_GROWTH * 100.0
        ));
    }
    if finished && !left_files.is_empty() {
        problems.push(format!(
            "{} temporary entries outlived the run",
            left_files.len()
        ));
    }
    if !left_procs.is_empty() {
        problems.push(format!("{} processes outlived the run", left_procs.len()));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!("soak: {}", problems.join("; "))))
    }
}

/// Writes every sample as a CSV row.
fn write_csv(path: &Path, samples: &[Sample]) -> Result<()> {
    let mut text = String::from("seconds,rss_kib,fds,threads,children,in_rl\n");
    for s in samples {
        text.push_str(&format!(
            "{},{},{},{},{},{}\n",
            s.seconds, s.rss_kib, s.fds, s.threads, s.children, s.in_rl
        ));
    }
    fs::write(path, text).map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))
}

/// Names left in `dir`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect()
}
