//! `cargo xtask chaos --kill-resume N`: exact resume under SIGKILL. The release `agentrl train`
//! runs a synchronous config (default `configs/chaos/kill-resume.toml`) once uninterrupted,
//! then again killed with SIGKILL N times at random moments (some land while a checkpoint is
//! being written) and resumed after each kill; the two must end with the same final weights,
//! bit for bit, and the same `rl_step` metrics (timing fields aside), every step once.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{Failure, Result, section};

/// What the command line asked for.
struct Options {
    kills: usize,
    config: PathBuf,
    seed: u64,
}

/// Parses `--kill-resume N [--config F] [--seed S]`.
fn parse(root: &Path, args: &[OsString]) -> Result<Options> {
    let mut options = Options {
        kills: 20,
        config: root.join("configs/chaos/kill-resume.toml"),
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(flag) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| Failure::new(format!("chaos: {name} needs a value")))
        };
        match flag.as_str() {
            "--kill-resume" => options.kills = number(&value("--kill-resume")?, "--kill-resume")?,
            "--config" => options.config = PathBuf::from(value("--config")?),
            "--seed" => options.seed = number(&value("--seed")?, "--seed")?,
            other => {
                return Err(Failure::new(format!(
                    "chaos --kill-resume: unknown argument `{other}` (expected --kill-resume N, \
                     --config FILE, --seed S)"
                )));
            }
        }
    }
    Ok(options)
}

/// Parses a whole number for `flag`.
fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T> {
    text.parse()
        .map_err(|_| Failure::new(format!("chaos: {flag} takes a whole number, got `{text}`")))
}

/// A small xorshift generator for the kill moments (printed seed, so a run can be repeated).
struct Moments(u64);

impl Moments {
    /// A uniform draw in `[0, 1)`.
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs the kill/resume chaos with the release binary `exe`.
pub fn run_kill_resume(root: &Path, exe: &Path, args: &[OsString]) -> Result<()> {
    let options = parse(root, args)?;
    if !options.config.is_file() {
        return Err(Failure::new(format!(
            "chaos: config {} does not exist",
            options.config.display()
        )));
    }
    // The derived config below names it as its base, from another folder.
    let base = std::fs::canonicalize(&options.config)
        .map_err(|e| Failure::new(format!("{}: {e}", options.config.display())))?;
    let out = root.join("runs/chaos-resume");
    let (whole, killed) = (out.join("whole"), out.join("killed"));
    for dir in [&whole, &killed] {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| Failure::new(format!("removing {}: {e}", dir.display())))?;
        }
    }
    // Four RL steps per kill (at least 12), so every kill finds the run still going.
    let steps = (4 * options.kills).max(12);
    let config = out.join("kill-resume.toml");
    let text = format!(
        "# `cargo xtask chaos --kill-resume {}`: {} with {steps} RL steps.\nbase = {:?}\n\n\
         [rl]\nsteps = {steps}\n",
        options.kills,
        options.config.display(),
        base.display().to_string()
    );
    std::fs::create_dir_all(&out)
        .and_then(|_| std::fs::write(&config, text))
        .map_err(|e| Failure::new(format!("writing {}: {e}", config.display())))?;
    section("chaos: the uninterrupted run");
    let t0 = Instant::now();
    finish(start(exe, &config, &whole)?, "the uninterrupted run")?;
    let whole_seconds = t0.elapsed().as_secs_f64();
    println!("{} in {whole_seconds:.1} s", whole.display());

    section(&format!(
        "chaos: the same run, killed {} times (seed {})",
        options.kills, options.seed
    ));
    let mut moments = Moments(options.seed.max(1));
    let mut tally = Tally::default();
    for kill in 1..=options.kills {
        let steps_before = steps_recorded(&killed);
        let mut child = start(exe, &config, &killed)?;
        // Anywhere from the process start to twice a whole run's share per kill later.
        let share = whole_seconds / options.kills.max(1) as f64;
        let wait = Duration::from_secs_f64(moments.next() * 2.0 * share);
        std::thread::sleep(wait);
        if let Ok(Some(_)) = child.try_wait() {
            println!("kill {kill}: the run finished before the kill");
            tally.finished_early += 1;
            break;
        }
        child
            .kill()
            .map_err(|e| Failure::new(format!("SIGKILL: {e}")))?;
        let _ = child.wait();
        let partial = partial_checkpoint(&killed);
        let steps_after = steps_recorded(&killed);
        tally.kills += 1;
        tally.during_checkpoint += usize::from(partial);
        println!(
            "kill {kill} after {:.2} s: {steps_before} → {steps_after} steps recorded{}",
            wait.as_secs_f64(),
            if partial {
                ", while a checkpoint was being written"
            } else {
                ""
            }
        );
    }
    finish(start(exe, &config, &killed)?, "the resumed run")?;

    section("chaos: comparison");
    let (want, got) = (rl_records(&whole)?, rl_records(&killed)?);
    let steps: Vec<u64> = got.iter().filter_map(|r| r["step"].as_u64()).collect();
    let once = steps.windows(2).all(|w| w[1] == w[0] + 1) && steps.first() == Some(&1);
    let same_metrics = got == want;
    let same_weights = final_weights(&whole)? == final_weights(&killed)?;
    println!("kills:                          {}", tally.kills);
    println!(
        "  while a checkpoint was written: {}",
        tally.during_checkpoint
    );
    println!(
        "steps (uninterrupted / killed): {} / {}",
        want.len(),
        got.len()
    );
    println!("every step recorded once:       {once}");
    println!("same rl_step metrics:           {same_metrics}");
    println!("same final weights (bytes):     {same_weights}");
    if once && same_metrics && same_weights && want.len() == got.len() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "chaos: the killed run differs from the uninterrupted one (compare {} and {})",
            whole.display(),
            killed.display()
        )))
    }
}

/// Kill counts.
#[derive(Default)]
struct Tally {
    kills: usize,
    during_checkpoint: usize,
    finished_early: usize,
}

/// Starts `agentrl train --config CONFIG --run-dir RUN_DIR`.
fn start(exe: &Path, config: &Path, run_dir: &Path) -> Result<Child> {
    Command::new(exe)
        .args(["train", "--config"])
        .arg(config)
        .arg("--run-dir")
        .arg(run_dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::new(format!("starting {}: {e}", exe.display())))
}

/// Waits for a run to exit; its stderr in the error when it failed.
fn finish(child: Child, what: &str) -> Result<()> {
    let out = child
        .wait_with_output()
        .map_err(|e| Failure::new(format!("{what}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// Whether a half-written checkpoint folder is there.
fn partial_checkpoint(run_dir: &Path) -> bool {
    std::fs::read_dir(run_dir.join("checkpoints"))
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        })
        .unwrap_or(false)
}

/// `rl_step` records so far.
fn steps_recorded(run_dir: &Path) -> usize {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .map(|t| t.matches("\"rl_step\"").count())
        .unwrap_or(0)
}

/// The `rl_step` records of a run without the fields that measure time or the engine's cache
/// use.
fn rl_records(run_dir: &Path) -> Result<Vec<serde_json::Value>> {
    Ok(
        crate::procs::rl_step_records(&run_dir.join("metrics.jsonl"))?
            .into_iter()
            .map(|mut r| {
                if let Some(fields) = r.as_object_mut() {
                    fields.retain(|key, _| {
                        !(key.contains("seconds")
                            || key.contains("per_second")
                            || matches!(
                                key.as_str(),
                                "prefill_tokens"
                                    | "reused_tokens"
                                    | "kv_evictions"
                                    | "session_cache_mib"
                            ))
                    });
                }
                r
            })
            .collect(),
    )
}

/// The bytes of a run's final weights (what `checkpoints/latest.json` names).
fn final_weights(run_dir: &Path) -> Result<Vec<u8>> {
    let latest = run_dir.join("checkpoints/latest.json");
    let text = std::fs::read(&latest)
        .map_err(|e| Failure::new(format!("reading {}: {e}", latest.display())))?;
    let value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Failure::new(format!("{}: {e}", latest.display())))?;
    let file = value["file"]
        .as_str()
        .ok_or_else(|| Failure::new(format!("{} names no file", latest.display())))?;
    let path = run_dir.join("checkpoints").join(file);
    std::fs::read(&path).map_err(|e| Failure::new(format!("reading {}: {e}", path.display())))
}
