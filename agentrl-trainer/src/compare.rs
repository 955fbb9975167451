//! `agentrl compare`: one Markdown table over the finished demo runs in a folder — held-out
//! success after RL per env and overall, its change from SFT, RL time and throughput — with
//! the seeds of a variant (run folders `NAME-seedN`) as mean ± standard deviation. With a
//! baseline variant, a second table gives each variant's difference from it seed by seed
//! (paired: the variants of one seed start from the same SFT weights, so the seed's own luck
//! cancels out). It is how `cargo xtask ablation` reports.
//!
//! ```no_run
//! use agentrl_trainer::compare::{CompareArgs, compare};
//!
//! let args = CompareArgs { runs: "runs/ablation".into(), baseline: Some("agentrl".into()) };
//! compare(&args, &mut std::io::stdout())?;
//! # Ok::<(), agentrl_core::Error>(())
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use clap::Args;

use crate::metrics::read_metrics;

/// `agentrl compare`: a table of the runs in a folder.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Folder whose subfolders are runs with a `summary.json` (as `agentrl demo` writes).
    pub runs: PathBuf,
    /// A variant to compare the others with seed by seed (a second table of paired
    /// differences in held-out success after RL).
    #[arg(long)]
    pub baseline: Option<String>,
}

/// One finished run, as the table needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Held-out success after SFT and after RL, per env.
    pub per_task: BTreeMap<String, (f64, f64)>,
    /// Held-out success after RL over every env's tasks.
    pub after_rl: f64,
    /// Held-out success after SFT over every env's tasks.
    pub before_rl: f64,
    /// Wall seconds of the RL phase.
    pub rl_seconds: f64,
    /// Mean generated tokens per second over the RL steps.
    pub tokens_per_second: f64,
}

impl RunResult {
    /// Reads `summary.json` and `metrics.jsonl` of the run in `dir`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
        let summary: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Error::json(path.display().to_string(), e))?;
        let number = |value: &serde_json::Value, what: &str| {
            value.as_f64().ok_or_else(|| {
                Error::Config(format!(
                    "{}: `{what}` is missing or not a number",
                    path.display()
                ))
            })
        };
        let mut per_task = BTreeMap::new();
        if let Some(tasks) = summary["per_task"].as_object() {
            for (env, change) in tasks {
                let before = number(&change["before_rl"], "per_task.*.before_rl")?;
                let after = number(&change["after_rl"], "per_task.*.after_rl")?;
                per_task.insert(env.clone(), (before, after));
            }
        }
        let records = read_metrics(&dir.join("metrics.jsonl"))?;
        let rates: Vec<f64> = records
            .iter()
            .filter(|r| r["kind"] == "rl_step")
            .filter_map(|r| r["tokens_per_second"].as_f64())
            .collect();
        Ok(RunResult {
            per_task,
            after_rl: number(&summary["eval_success_after_rl"], "eval_success_after_rl")?,
            before_rl: number(&summary["eval_success_before_rl"], "eval_success_before_rl")?,
            rl_seconds: number(&summary["phase_seconds"]["rl"], "phase_seconds.rl")?,
            tokens_per_second: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        })
    }
}

/// The variant a run folder belongs to: its name without a trailing `-seedN`.
pub fn variant_of(run_name: &str) -> &str {
    split_seed(run_name).0
}

/// A run folder's name as (variant, seed): `NAME-seedN` gives `(NAME, Some(N))`, any other
/// name itself and `None`.
fn split_seed(run_name: &str) -> (&str, Option<u64>) {
    match run_name.rsplit_once("-seed") {
        Some((variant, seed)) if !seed.is_empty() && seed.bytes().all(|b| b.is_ascii_digit()) => {
            (variant, seed.parse().ok())
        }
        _ => (run_name, None),
    }
}

/// `mean ± std` (population standard deviation) of `values`, to `decimals` places; just the
/// value for one run.
fn mean_std(values: &[f64], decimals: usize) -> String {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return format!("{mean:.decimals$}");
    }
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    format!("{mean:.decimals$} ± {std:.decimals$}")
}

/// The envs of `runs`, each once, in name order: the per-env columns of a table.
fn env_names<'a>(runs: impl Iterator<Item = &'a RunResult>) -> Vec<&'a str> {
    let mut envs: Vec<&str> = runs
        .flat_map(|r| r.per_task.keys().map(String::as_str))
        .collect();
    envs.sort_unstable();
    envs.dedup();
    envs
}

/// The Markdown table of `runs` (run name, result), one row per variant in name order.
pub fn table(runs: &[(String, RunResult)]) -> String {
    let mut variants: BTreeMap<&str, Vec<&RunResult>> = BTreeMap::new();
    for (name, result) in runs {
        variants.entry(variant_of(name)).or_default().push(result);
    }
    let envs = env_names(runs.iter().map(|(_, r)| r));
    let mut out = String::from("| variant | seeds |");
    for env in &envs {
        out.push_str(&format!(" {env} |"));
    }
    out.push_str(" all envs | change from SFT | RL s | generated tokens/s |\n|---|---:|");
    out.push_str(&"---:|".repeat(envs.len() + 4));
    out.push('\n');
    for (variant, results) in variants {
        out.push_str(&format!("| {variant} | {} |", results.len()));
        for env in &envs {
            let after: Vec<f64> = results
                .iter()
                .filter_map(|r| r.per_task.get(*env).map(|(_, after)| *after))
                .collect();
            out.push_str(&format!(" {} |", mean_std(&after, 3)));
        }
        let column = |f: fn(&RunResult) -> f64| results.iter().map(|r| f(r)).collect::<Vec<_>>();
        out.push_str(&format!(
            " {} | {} | {} | {} |\n",
            mean_std(&column(|r| r.after_rl), 3),
            mean_std(&column(|r| r.after_rl - r.before_rl), 3),
            mean_std(&column(|r| r.rl_seconds), 0),
            mean_std(&column(|r| r.tokens_per_second), 0),
        ));
    }
    out
}

/// The Markdown table of each variant's difference from `baseline` in held-out success after
/// RL, per env and overall, over the seeds both have (runs named `NAME-seedN`): mean ± std of
/// the per-seed differences, then the overall difference of each seed. A variant with no seed
/// in common with the baseline gets no row; an error when `baseline` has no seeded run.
pub fn paired_table(runs: &[(String, RunResult)], baseline: &str) -> Result<String> {
    let mut by_variant: BTreeMap<&str, BTreeMap<u64, &RunResult>> = BTreeMap::new();
    for (name, result) in runs {
        if let (variant, Some(seed)) = split_seed(name) {
            by_variant.entry(variant).or_default().insert(seed, result);
        }
    }
    let Some(base) = by_variant.remove(baseline) else {
        let known: Vec<&str> = by_variant.keys().copied().collect();
        return Err(Error::Config(format!(
            "baseline `{baseline}` has no run named `{baseline}-seedN` (variants with seeds: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let envs = env_names(base.values().copied());
    let mut out = format!("| variant − {baseline} | seeds |");
    for env in &envs {
        out.push_str(&format!(" {env} |"));
    }
    out.push_str(" all envs | all envs per seed |\n|---|---:|");
    out.push_str(&"---:|".repeat(envs.len() + 1));
    out.push_str("---|\n");
    for (variant, seeds) in &by_variant {
        let pairs: Vec<(u64, &RunResult, &RunResult)> = seeds
            .iter()
            .filter_map(|(seed, run)| base.get(seed).map(|b| (*seed, *run, *b)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        out.push_str(&format!("| {variant} | {} |", pairs.len()));
        for env in &envs {
            let differences: Vec<f64> = pairs
                .iter()
                .filter_map(|(_, run, b)| Some(run.per_task.get(*env)?.1 - b.per_task.get(*env)?.1))
                .collect();
            out.push_str(&format!(" {} |", signed_mean_std(&differences)));
        }
        let overall: Vec<f64> = pairs
            .iter()
            .map(|(_, run, b)| run.after_rl - b.after_rl)
            .collect();
        let per_seed: Vec<String> = pairs
            .iter()
            .zip(&overall)
            .map(|((seed, _, _), d)| format!("{seed}: {}", signed_mean_std(&[*d])))
            .collect();
        out.push_str(&format!(
            " {} | {} |\n",
            signed_mean_std(&overall),
            per_seed.join(", ")
        ));
    }
    Ok(out)
}

/// [`mean_std`] of differences, with the mean's sign always written (`+0.000` for a mean that
/// rounds to zero); `–` when there are none.
fn signed_mean_std(values: &[f64]) -> String {
    if values.is_empty() {
        return "–".to_string();
    }
    let text = mean_std(values, 3);
    match text.strip_prefix('-') {
        Some(rest) if rest.starts_with("0.000") => format!("+{rest}"),
        Some(_) => text,
        None => format!("+{text}"),
    }
}

/// Reads every run under `args.runs` that has a `summary.json` (others are skipped with a
/// note on stderr) and writes the table to `out`, then the paired table when `args.baseline`
/// is set.
pub fn compare(args: &CompareArgs, out: &mut dyn Write) -> Result<()> {
    let dir = &args.runs;
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("reading", dir, e))?;
    let mut runs = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io("reading", dir, e))?.path();
        if !path.join("summary.json").is_file() {
            if path.is_dir() {
                eprintln!("skipping {}: no summary.json (unfinished?)", path.display());
            }
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        runs.push((name, RunResult::read(&path)?));
    }
    if runs.is_empty() {
        return Err(Error::Config(format!(
            "{} holds no finished run (no subfolder with a summary.json)",
            dir.display()
        )));
    }
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = table(&runs);
    if let Some(baseline) = &args.baseline {
        text.push('\n');
        text.push_str(&paired_table(&runs, baseline)?);
    }
    write!(out, "{text}").map_err(|e| Error::io("writing the table of", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(a: f64, b: f64, before: f64) -> RunResult {
        RunResult {
            per_task: [
                ("a".to_string(), (before, a)),
                ("b".to_string(), (before, b)),
            ]
            .into(),
            after_rl: (a + b) / 2.0,
            before_rl: before,
            rl_seconds: 100.0,
            tokens_per_second: 50.0,
        }
    }

    #[test]
    fn seeds_of_a_variant_become_mean_and_std() {
        assert_eq!(variant_of("sync-seed12"), "sync");
        assert_eq!(variant_of("no-task-norm-seed0"), "no-task-norm");
        assert_eq!(variant_of("seedless"), "seedless");
        assert_eq!(variant_of("x-seed"), "x-seed");
        let runs = vec![
            ("base-seed0".to_string(), result(0.5, 0.7, 0.2)),
            ("base-seed1".to_string(), result(0.7, 0.9, 0.2)),
            ("sync-seed0".to_string(), result(0.4, 0.6, 0.3)),
        ];
        let table = table(&runs);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| variant | seeds | a | b | all envs | change from SFT | RL s | generated tokens/s |"
        );
        // base: a = 0.6 ± 0.1, b = 0.8 ± 0.1, all = 0.7 ± 0.1, change 0.5 ± 0.1.
        assert_eq!(
            lines[2],
            "| base | 2 | 0.600 ± 0.100 | 0.800 ± 0.100 | 0.700 ± 0.100 | 0.500 ± 0.100 | 100 ± 0 | 50 ± 0 |"
        );
        assert_eq!(
            lines[3],
            "| sync | 1 | 0.400 | 0.600 | 0.500 | 0.200 | 100 | 50 |"
        );
    }

    #[test]
    fn variants_are_compared_with_the_baseline_seed_by_seed() {
        let runs = vec![
            ("base-seed0".to_string(), result(0.5, 0.7, 0.2)),
            ("base-seed1".to_string(), result(0.7, 0.9, 0.2)),
            ("base-seed2".to_string(), result(0.1, 0.1, 0.1)),
            ("other-seed0".to_string(), result(0.6, 0.7, 0.2)),
            ("other-seed1".to_string(), result(0.5, 0.9, 0.2)),
            ("unpaired-seed7".to_string(), result(0.9, 0.9, 0.2)),
            ("seedless".to_string(), result(0.9, 0.9, 0.2)),
        ];
        let table = paired_table(&runs, "base").unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| variant − base | seeds | a | b | all envs | all envs per seed |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---|");
        // Seed 0: a +0.1, b 0, all +0.05; seed 1: a -0.2, b 0, all -0.1; seed 2 is the
        // baseline's alone and `unpaired` shares no seed with it.
        assert_eq!(
            lines[2],
            "| other | 2 | -0.050 ± 0.150 | +0.000 ± 0.000 | -0.025 ± 0.075 | 0: +0.050, 1: -0.100 |"
        );
        assert_eq!(lines.len(), 3);
        assert_eq!(signed_mean_std(&[0.175 - 0.17500000000000002]), "+0.000");
        assert_eq!(signed_mean_std(&[]), "–");
        let error = paired_table(&runs, "missing").unwrap_err().to_string();
        assert!(error.contains("`missing`"), "{error}");
        assert!(error.contains("base, other, unpaired"), "{error}");
    }
}
