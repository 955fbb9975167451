//! `cargo xtask fuzz --seconds N [TARGET...]`: runs the `cargo fuzz` targets of `fuzz/`.
//!
//! Installs cargo-fuzz when `cargo +nightly fuzz` is missing, then runs each target for N
//! seconds with libFuzzer (`-rss_limit_mb=2048 -timeout=10 -print_final_stats=1`), starting
//! from the committed seeds of `fuzz/corpus/TARGET` (and, for `run_toml`, every shipped run
//! config, copied afresh into the git-ignored `fuzz/corpus-shipped/run_toml`) and writing the
//! inputs it grows into the git-ignored `fuzz/corpus-local/TARGET` (the crashes saved in `fuzz/regressions/TARGET` are
//! replayed by the stable tests, `*/tests/fuzz_regressions.rs`). Prints one row per target (executions, exec/s, crashes, timeouts
//! and out-of-memory findings, all written under `fuzz/artifacts/TARGET`) and fails when any
//! target found something. Each run's full libFuzzer output is kept in
//! `fuzz/target/xtask-logs/TARGET.log`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Failure, Result, describe, section};

/// A fuzz target: its binary name in `fuzz/Cargo.toml`, whether it needs the `trainer`
/// feature (agentrl-trainer, which links libtorch), and the shipped files it also starts from.
struct Target {
    /// The `[[bin]]` name.
    name: &'static str,
    /// Built with `--features trainer` (and run with libtorch on the library path).
    trainer: bool,
    /// Folders (from the repository root) searched recursively for seeds too, and the file
    /// extension that makes a file one (`run_toml`: every shipped run config).
    /// They are copied afresh before each run, so no committed copy can drift from them.
    shipped: Option<(&'static [&'static str], &'static str)>,
}

/// Every target, in the order they run.
const TARGETS: [Target; 11] = [
    Target::plain("tool_calls"),
    Target::plain("chat_format"),
    Target::plain("protocol_bodies"),
    Target {
        name: "run_toml",
        trainer: true,
        shipped: Some((&["configs", "examples"], "toml")),
    },
    Target::plain("reward_tree"),
    Target::plain("gguf"),
    Target::plain("safetensors_header"),
    Target::plain("hf_config"),
    Target::plain("tokenizer_config"),
    Target::plain("chat_template"),
    Target::plain("trajectory_jsonl"),
];

impl Target {
    /// A target that needs no libtorch.
    const fn plain(name: &'static str) -> Self {
        Target {
            name,
            trainer: false,
            shipped: None,
        }
    }
}

/// Seconds per target when `--seconds` is not given.
const DEFAULT_SECONDS: u64 = 60;

/// What one libFuzzer run reported.
#[derive(Debug, Default, Clone, PartialEq)]
struct Stats {
    /// Inputs executed.
    executions: u64,
    /// Average executions per second.
    exec_per_sec: u64,
}

/// One target's row of the final table.
struct Row {
    /// The target.
    name: &'static str,
    /// What libFuzzer reported (none when it did not print its figures).
    stats: Option<Stats>,
    /// New `crash-*` and `leak-*` artifacts.
    crashes: usize,
    /// New `timeout-*`, `oom-*` and `slow-unit-*` artifacts.
    hangs: usize,
    /// libFuzzer's exit status, when it was not success.
    failed: Option<String>,
}

/// Parses `--seconds N [TARGET...]` and runs the targets.
pub fn cmd_fuzz(root: &Path, args: &[OsString]) -> Result<()> {
    let (seconds, names) = parse_args(args)?;
    let targets: Vec<&Target> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names
            .iter()
            .map(|n| {
                TARGETS.iter().find(|t| t.name == n).ok_or_else(|| {
                    Failure::new(format!(
                        "fuzz: unknown target `{n}`; the targets are {}",
                        TARGETS.map(|t| t.name).join(", ")
                    ))
                })
            })
            .collect::<Result<_>>()?
    };
    ensure_cargo_fuzz(root)?;
    let libtorch = if targets.iter().any(|t| t.trainer) {
        Some(libtorch_dir(root)?)
    } else {
        None
    };
    let logs = root.join("fuzz").join("target").join("xtask-logs");
    fs::create_dir_all(&logs)
        .map_err(|e| Failure::new(format!("creating {}: {e}", logs.display())))?;
    let mut rows = Vec::new();
    for target in targets {
        section(&format!("fuzz: {} for {seconds} s", target.name));
        rows.push(run_target(
            root,
            target,
            seconds,
            libtorch.as_deref(),
            &logs,
        )?);
    }
    print_table(&rows);
    let bad: Vec<&str> = rows
        .iter()
        .filter(|r| r.crashes > 0 || r.hangs > 0 || r.failed.is_some())
        .map(|r| r.name)
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Failure::new(format!(
        "fuzz: {} found crashes, hangs or failed; the inputs are under fuzz/artifacts/TARGET/ \
         (fix the parser, then save each input to fuzz/regressions/TARGET/ so the replay \
         tests keep it)",
        bad.join(", ")
    )))
}

/// `--seconds N` (default [`DEFAULT_SECONDS`]) and the target names.
fn parse_args(args: &[OsString]) -> Result<(u64, Vec<String>)> {
    let mut seconds = DEFAULT_SECONDS;
    let mut names = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let arg = arg
            .to_str()
            .ok_or_else(|| Failure::new(format!("fuzz: argument {arg:?} is not UTF-8")))?;
        match arg {
            "--seconds" => {
                let value = iter.next().and_then(|v| v.to_str()).unwrap_or("");
                seconds = value.parse().ok().filter(|&s| s > 0).ok_or_else(|| {
                    Failure::new(format!(
                        "fuzz: --seconds needs a positive number, got `{value}`"
                    ))
                })?;
            }
            flag if flag.starts_with('-') => {
                return Err(Failure::new(format!(
                    "fuzz: unknown option `{flag}`; usage: cargo xtask fuzz --seconds N [TARGET...]"
                )));
            }
            name => names.push(name.to_string()),
        }
    }
    Ok((seconds, names))
}

/// Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) unless `cargo +nightly fuzz`
/// already answers.
fn ensure_cargo_fuzz(root: &Path) -> Result<()> {
    let present = nightly_cargo(root)
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    section("fuzz: installing cargo-fuzz");
    let mut install = Command::new("cargo");
    install
        .current_dir(root)
        .args(["install", "cargo-fuzz", "--locked"]);
    crate::run("cargo install cargo-fuzz", &mut install)
}

/// `cargo +nightly` in `root` (rustup's proxy picks the nightly toolchain; cargo-fuzz needs its
/// sanitizer flags).
fn nightly_cargo(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).arg("+nightly");
    cmd
}

/// The libtorch directory for the `trainer` targets: provisioned by setup unless LIBTORCH is
/// exported.
fn libtorch_dir(root: &Path) -> Result<PathBuf> {
    let cuda = crate::prepare_libtorch(root)?;
    Ok(crate::user_libtorch(root)
        .or(cuda)
        .unwrap_or_else(|| crate::libtorch::layout_dir(root, crate::Layout::Cpu)))
}

/// Runs one target for `seconds`, its output going to `logs/NAME.log`; a build failure is an
/// error, a finding is a row.
fn run_target(
    root: &Path,
    target: &Target,
    seconds: u64,
    libtorch: Option<&Path>,
    logs: &Path,
) -> Result<Row> {
    let fuzz = root.join("fuzz");
    let local = fuzz.join("corpus-local").join(target.name);
    let seeds = fuzz.join("corpus").join(target.name);
    let artifacts = fuzz.join("artifacts").join(target.name);
    for dir in [&local, &seeds, &artifacts] {
        fs::create_dir_all(dir)
            .map_err(|e| Failure::new(format!("creating {}: {e}", dir.display())))?;
    }
    let shipped = copy_shipped_seeds(root, target)?;
    let before = list(&artifacts);
    let mut cmd = nightly_cargo(root);
    cmd.args(["fuzz", "run"]);
    if target.trainer {
        // libtorch is not instrumented: AddressSanitizer would only see half the program. Other
        // flags mean other artifacts: a target directory of their own keeps both builds.
        let dir = fuzz.join("target").join("no-sanitizer");
        cmd.args([
            "--features",
            "trainer",
            "--sanitizer",
            "none",
            "--target-dir",
        ])
        .arg(dir);
    }
    if let Some(dir) = libtorch.filter(|_| target.trainer) {
        let lib = dir.join("lib");
        let path = match std::env::var_os("LD_LIBRARY_PATH") {
            Some(old) if !old.is_empty() => {
                let mut joined = lib.into_os_string();
                joined.push(":");
                joined.push(old);
                joined
            }
            _ => lib.into_os_string(),
        };
        cmd.env("LIBTORCH", dir).env("LD_LIBRARY_PATH", path);
    }
    // Saved crashes are replayed by the stable tests, not here: one long input would make
    // libFuzzer mutate inputs of its length and slow every target down.
    cmd.arg(target.name).arg(&local).arg(&seeds);
    cmd.args(&shipped);
    cmd.arg("--").args([
        format!("-max_total_time={seconds}"),
        "-rss_limit_mb=2048".to_string(),
        "-timeout=10".to_string(),
        "-print_final_stats=1".to_string(),
    ]);
    let log_path = logs.join(format!("{}.log", target.name));
    let log = fs::File::create(&log_path)
        .map_err(|e| Failure::new(format!("creating {}: {e}", log_path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| Failure::new(format!("opening {}: {e}", log_path.display())))?;
    println!("$ {}", describe(&cmd));
    println!("  (output in {})", log_path.display());
    let started = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .status()
        .map_err(|e| Failure::new(format!("fuzz: could not start cargo: {e}")))?;
    let output = fs::read_to_string(&log_path).unwrap_or_default();
    let stats = parse_stats(&output);
    let new: Vec<String> = list(&artifacts).difference(&before).cloned().collect();
    let crashes = new
        .iter()
        .filter(|n| n.starts_with("crash-") || n.starts_with("leak-"))
        .count();
    let hangs = new.len() - crashes;
    if !status.success() && stats.is_none() && new.is_empty() {
        print_tail(&output);
        return Err(Failure::new(format!(
            "fuzz: `{}` failed ({status}) before fuzzing; see {}",
            target.name,
            log_path.display()
        )));
    }
    if !new.is_empty() {
        print_tail(&output);
        for name in &new {
            println!("  found: {}", artifacts.join(name).display());
        }
    }
    println!(
        "  {} after {:.0} s",
        match &stats {
            Some(s) => format!("{} executions, {} exec/s", s.executions, s.exec_per_sec),
            None => "no statistics".to_string(),
        },
        started.elapsed().as_secs_f64()
    );
    Ok(Row {
        name: target.name,
        stats,
        crashes,
        hangs,
        failed: (!status.success()).then(|| status.to_string()),
    })
}

/// Copies the shipped files `target` also starts from (see [`Target::shipped`]) into the
/// git-ignored `fuzz/corpus-shipped/TARGET`, emptied first, each named by its path with `/` as
/// `_`; returns that folder, or `None` when the target has no shipped seeds.
fn copy_shipped_seeds(root: &Path, target: &Target) -> Result<Option<PathBuf>> {
    let Some((folders, extension)) = target.shipped else {
        return Ok(None);
    };
    let dir = root.join("fuzz").join("corpus-shipped").join(target.name);
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        Failure::new(format!("fuzz: {what} {}: {e}", path.display()))
    };
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| fail("emptying", &dir, e))?;
    }
    fs::create_dir_all(&dir).map_err(|e| fail("creating", &dir, e))?;
    let mut files = Vec::new();
    for folder in folders {
        files_with_extension(&root.join(folder), extension, &mut files);
    }
    for file in &files {
        let name = seed_name(root, file);
        fs::copy(file, dir.join(name)).map_err(|e| fail("copying", file, e))?;
    }
    println!(
        "  ({} shipped .{extension} files added as seeds from {})",
        files.len(),
        folders.join(", ")
    );
    Ok(Some(dir))
}

/// The seed file name of shipped `file`: its path from `root` with `/` as `_`, so that files of
/// the same name in different folders stay apart.
fn seed_name(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file);
    relative.to_string_lossy().replace('/', "_")
}

/// Appends to `out` every regular file under `dir` (recursively, links not followed) whose
/// name ends in `.extension`.
fn files_with_extension(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Ok(kind) = fs::symlink_metadata(&path).map(|m| m.file_type()) else {
            continue;
        };
        if kind.is_dir() {
            files_with_extension(&path, extension, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}

/// The file names in `dir` (empty when it cannot be read).
fn list(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The figures of libFuzzer's output: `stat::number_of_executed_units` and
/// `stat::average_exec_per_sec` (from `-print_final_stats=1`), else the last `#N ... exec/s: X`
/// status line (`#N DONE` at a normal end).
fn parse_stats(output: &str) -> Option<Stats> {
    let stat = |key: &str| -> Option<u64> {
        output.lines().rev().find_map(|line| {
            line.trim()
                .strip_prefix(key)?
                .trim_start()
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
        })
    };
    if let Some(executions) = stat("stat::number_of_executed_units") {
        return Some(Stats {
            executions,
            exec_per_sec: stat("stat::average_exec_per_sec").unwrap_or(0),
        });
    }
    output.lines().rev().find_map(|line| {
        let rest = line.trim().strip_prefix('#')?;
        let executions = rest.split_whitespace().next()?.parse().ok()?;
        let exec_per_sec = rest
            .split("exec/s:")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Some(Stats {
            executions,
            exec_per_sec,
        })
    })
}

/// The last lines of a log (the crash report, or the build error).
fn print_tail(output: &str) {
    let lines: Vec<&str> = output.lines().collect();
    for line in &lines[lines.len().saturating_sub(40)..] {
        println!("  | {line}");
    }
}

/// The summary: one row per target.
fn print_table(rows: &[Row]) {
    section("fuzz: summary");
    println!(
        "{:<20} {:>13} {:>9} {:>8} {:>14}  status",
        "target", "executions", "exec/s", "crashes", "timeouts/ooms"
    );
    for row in rows {
        let (executions, rate) = match &row.stats {
            Some(s) => (s.executions.to_string(), s.exec_per_sec.to_string()),
            None => ("?".to_string(), "?".to_string()),
        };
        let status = match (&row.failed, row.crashes + row.hangs) {
            (None, 0) => "ok".to_string(),
            (Some(why), _) => format!("failed ({why})"),
            (None, _) => "findings".to_string(),
        };
        println!(
            "{:<20} {:>13} {:>9} {:>8} {:>14}  {status}",
            row.name, executions, rate, row.crashes, row.hangs
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_run_configs_become_seeds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut configs = Vec::new();
        files_with_extension(&root.join("configs"), "toml", &mut configs);
        let names: Vec<String> = configs.iter().map(|p| seed_name(&root, p)).collect();
        assert!(
            names.contains(&"configs_multitask.toml".to_string()),
            "{names:?}"
        );
        assert!(
            names.iter().any(|n| n.starts_with("configs_ablation_")),
            "subfolders are searched: {names:?}"
        );
        assert!(
            configs
                .iter()
                .all(|p| p.extension().is_some_and(|e| e == "toml"))
        );
        let run_toml = TARGETS.iter().find(|t| t.name == "run_toml");
        assert!(run_toml.is_some_and(|t| t.shipped.is_some()));
    }

    #[test]
    fn final_stats_win_over_status_lines() {
        let out = "#65536 pulse cov: 10 exec/s: 300\n#120000 DONE cov: 12 exec/s: 2000\n\
                   Done 120000 runs in 60 second(s)\nstat::number_of_executed_units: 120001\n\
                   stat::average_exec_per_sec:     2000\nstat::peak_rss_mb: 40\n";
        assert_eq!(
            parse_stats(out),
            Some(Stats {
                executions: 120001,
                exec_per_sec: 2000
            })
        );
    }

    #[test]
    fn status_line_without_final_stats() {
        let out = "INFO: seed\n#8 INITED cov: 3 ft: 3 corp: 1/1b exec/s: 0 rss: 30Mb\n\
                   #4096 pulse cov: 9 ft: 9 corp: 4/10b lim: 43 exec/s: 2048 rss: 31Mb\n==1== ERROR";
        assert_eq!(
            parse_stats(out),
            Some(Stats {
                executions: 4096,
                exec_per_sec: 2048
            })
        );
        assert_eq!(parse_stats("no figures"), None);
    }

    #[test]
    fn arguments() {
        let args: Vec<OsString> = ["--seconds", "5", "gguf"].map(OsString::from).to_vec();
        assert_eq!(parse_args(&args).ok(), Some((5, vec!["gguf".to_string()])));
        assert!(parse_args(&[OsString::from("--seconds")]).is_err());
        assert!(parse_args(&[OsString::from("--jobs")]).is_err());
        assert_eq!(parse_args(&[]).ok(), Some((DEFAULT_SECONDS, vec![])));
    }
}
