//! `cargo xtask gpu-check`: what only a machine with an NVIDIA GPU can check, in one command.
//!
//! 1. The GPU: `nvidia-smi` must list one; without it the check says so and stops (exit
//!    code 2) instead of passing on the CPU.
//! 2. The CUDA layout of libtorch (`cargo xtask setup --cuda`, or an exported LIBTORCH that
//!    has `libtorch_cuda.so`), the release `agentrl` and the CUDA test binary built against it.
//! 3. The CUDA tests (`agentrl-trainer/tests/cuda.rs`) with `AGENTRL_REQUIRE_CUDA=1`, so a
//!    missing device fails them instead of skipping them.
//! 4. `bench --vs-trl --device cuda --bf16`: TRL's and `agentrl`'s GRPO job on the GPU in bf16,
//!    with the model FLOP utilisation against the bf16 matmul peak measured in the same run.
//!
//! A GPU machine without a Rust toolchain (or without network) runs prebuilt binaries:
//! `cargo xtask gpu-check --pack DIR` builds `agentrl`, the CUDA tests and xtask itself into
//! DIR with the LIBTORCH exported here; there, `DIR/xtask gpu-check --prebuilt DIR` from the
//! repository root, with `LD_LIBRARY_PATH` naming that machine's libtorch `lib/` folder.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::libtorch::Layout;
use crate::{Failure, Result, describe, run, section};

/// The exit code when there is no GPU: not a pass, and not a broken check either.
const NO_GPU_EXIT: u8 = 2;
/// What the issue asks the whole check to take on a GPU machine, in seconds.
const TARGET_SECONDS: f64 = 8.0 * 60.0;

/// The command line of `gpu-check`.
struct Options {
    /// `--pack DIR`: build the binaries into DIR and stop.
    pack: Option<PathBuf>,
    /// `--prebuilt DIR`: run DIR's binaries instead of building.
    prebuilt: Option<PathBuf>,
    /// Rounds of the vs-TRL job (A B A B).
    rounds: usize,
    /// Steps per side and round, the first a warm-up.
    steps: usize,
}

fn parse(args: &[OsString]) -> Result<Options> {
    let usage = "usage: cargo xtask gpu-check [--rounds N] [--steps N] [--prebuilt DIR] | \
                 --pack DIR";
    let mut options = Options {
        pack: None,
        prebuilt: None,
        rounds: 2,
        steps: 4,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .ok_or_else(|| Failure::new(format!("{what} needs a value; {usage}")))
        };
        match arg.to_str() {
            Some("--pack") => options.pack = Some(PathBuf::from(value("--pack")?)),
            Some("--prebuilt") => options.prebuilt = Some(PathBuf::from(value("--prebuilt")?)),
            Some(flag @ ("--rounds" | "--steps")) => {
                let min = if flag == "--steps" { 2 } else { 1 };
                let n = value(flag)?
                    .to_str()
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n >= min)
                    .ok_or_else(|| {
                        Failure::new(format!("{flag} takes a whole number >= {min}; {usage}"))
                    })?;
                if flag == "--rounds" {
                    options.rounds = n;
                } else {
                    options.steps = n;
                }
            }
            _ => return Err(Failure::new(format!("unknown argument {arg:?}; {usage}"))),
        }
    }
    if options.pack.is_some() && options.prebuilt.is_some() {
        return Err(Failure::new(format!(
            "--pack builds binaries and --prebuilt runs them: give one; {usage}"
        )));
    }
    Ok(options)
}

/// `cargo xtask gpu-check [...]`.
pub fn cmd_gpu_check(root: &Path, args: &[OsString]) -> Result<()> {
    let options = parse(args)?;
    if let Some(dir) = &options.pack {
        return pack(root, dir);
    }
    let started = Instant::now();
    section("gpu-check: the GPU");
    let Some(gpus) = crate::nvidia_gpus() else {
        return Err(Failure {
            message: "gpu-check: no NVIDIA GPU here (`nvidia-smi -L` is missing or lists \
                      none), so nothing was checked; run it on a machine with an NVIDIA GPU \
                      and driver 580 or newer (the CPU path is what `cargo xtask test` checks)"
                .to_string(),
            code: NO_GPU_EXIT,
        });
    };
    println!("{}", gpus.trim_end());
    let mut query = Command::new("nvidia-smi");
    query.args([
        "--query-gpu=name,memory.total,driver_version,clocks.max.sm",
        "--format=csv",
    ]);
    run("nvidia-smi --query-gpu", &mut query)?;

    let binaries = match &options.prebuilt {
        Some(dir) => Binaries::prebuilt(dir)?,
        None => Binaries::build(root)?,
    };

    section("gpu-check: CUDA tests");
    let mut tests = Command::new(&binaries.cuda_tests);
    tests
        .current_dir(root.join("agentrl-trainer"))
        .env("AGENTRL_REQUIRE_CUDA", "1")
        .arg("--test-threads=1");
    run("the CUDA tests", &mut tests)?;
    let tests_done = started.elapsed().as_secs_f64();

    let work = crate::target_dir(root).join("gpu-check");
    let vs_trl_args: Vec<OsString> = [
        "--device",
        "cuda",
        "--bf16",
        "--rounds",
        &options.rounds.to_string(),
        "--steps",
        &options.steps.to_string(),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    crate::vs_trl::cmd_vs_trl(root, &work, &binaries.agentrl, &vs_trl_args)?;

    let total = started.elapsed().as_secs_f64();
    section("gpu-check: done");
    println!(
        "CUDA tests passed after {tests_done:.0} s; the bf16 job on the GPU is in {}; the \
         whole check took {total:.0} s ({} the {:.0}-minute target)",
        work.join("results.json").display(),
        if total <= TARGET_SECONDS {
            "within"
        } else {
            "over"
        },
        TARGET_SECONDS / 60.0
    );
    Ok(())
}

/// The two binaries the check runs.
struct Binaries {
    /// The release `agentrl`.
    agentrl: PathBuf,
    /// The test binary of `agentrl-trainer/tests/cuda.rs`.
    cuda_tests: PathBuf,
}

impl Binaries {
    /// `DIR/agentrl` and `DIR/cuda-tests`, after checking that `agentrl` starts (finds its
    /// libtorch).
    fn prebuilt(dir: &Path) -> Result<Self> {
        section(&format!(
            "gpu-check: prebuilt binaries in {}",
            dir.display()
        ));
        let binaries = Binaries {
            agentrl: dir.join("agentrl"),
            cuda_tests: dir.join("cuda-tests"),
        };
        for file in [&binaries.agentrl, &binaries.cuda_tests] {
            if !file.is_file() {
                return Err(Failure::new(format!(
                    "{} is missing; make DIR with `cargo xtask gpu-check --pack DIR`",
                    file.display()
                )));
            }
        }
        let mut probe = Command::new(&binaries.agentrl);
        probe.arg("--version").stdout(Stdio::null());
        let out = probe
            .output()
            .map_err(|e| Failure::new(format!("could not start {}: {e}", describe(&probe))))?;
        if !out.status.success() {
            return Err(Failure::new(format!(
                "{} does not start ({}): {}; set LD_LIBRARY_PATH to the lib/ folder of a CUDA \
                 libtorch of the version it was built against",
                binaries.agentrl.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(binaries)
    }

    /// The CUDA layout of libtorch, then the release `agentrl` and the CUDA test binary.
    fn build(root: &Path) -> Result<Self> {
        section("gpu-check: libtorch (CUDA)");
        let libtorch = match crate::user_libtorch(root) {
            Some(dir) => {
                println!("using LIBTORCH={} from your environment", dir.display());
                dir
            }
            None => crate::libtorch::ensure(root, Layout::Cuda)?,
        };
        if !libtorch.join("lib").join("libtorch_cuda.so").is_file() {
            return Err(Failure::new(format!(
                "LIBTORCH={} has no lib/libtorch_cuda.so: it is a CPU build, so nothing would \
                 run on the GPU; unset LIBTORCH (gpu-check then provisions the CUDA layout) or \
                 point it at a CUDA libtorch",
                libtorch.display()
            )));
        }
        // A folder of its own, so the CUDA build and the CPU one in `target/release` do not
        // rebuild each other (torch-sys rebuilds whenever LIBTORCH changes).
        let target = crate::target_dir(root).join("cuda");
        section(&format!(
            "gpu-check: build (release, in {})",
            target.display()
        ));
        // Every cargo command of the check: the CUDA libtorch, the CUDA target folder.
        let cuda_cargo = || {
            let mut cmd = crate::cargo(root, Some(&libtorch));
            cmd.env("CARGO_TARGET_DIR", &target);
            cmd
        };
        let mut build = cuda_cargo();
        build.args([
            "build",
            "--release",
            "-p",
            "agentrl-trainer",
            "--bin",
            "agentrl",
        ]);
        run("build of the agentrl binary", &mut build)?;
        let agentrl = target.join("release").join("agentrl");
        let mut tests = cuda_cargo();
        tests.args([
            "test",
            "--release",
            "-p",
            "agentrl-trainer",
            "--test",
            "cuda",
            "--no-run",
            "--message-format=json",
        ]);
        let cuda_tests = test_executable(&mut tests, "cuda")?;
        Ok(Binaries {
            agentrl,
            cuda_tests,
        })
    }
}

/// Builds a test target with `cmd` (a `cargo test --no-run --message-format=json`) and returns
/// the executable cargo reports for the target named `name`.
fn test_executable(cmd: &mut Command, name: &str) -> Result<PathBuf> {
    println!("$ {}", describe(cmd));
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure::new(format!("could not run {}: {e}", describe(cmd))))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "the build of the `{name}` tests failed ({}); see the cargo errors above",
            out.status
        )));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["target"]["name"] == name)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| {
            Failure::new(format!(
                "cargo reported no executable for the `{name}` tests"
            ))
        })
}

/// `--pack DIR`: the release `agentrl`, the CUDA tests and this xtask, built with the LIBTORCH
/// exported here (which must be a CUDA build), copied into DIR.
fn pack(root: &Path, dir: &Path) -> Result<()> {
    let built = Binaries::build(root)?;
    fs::create_dir_all(dir)
        .map_err(|e| Failure::new(format!("creating {}: {e}", dir.display())))?;
    let xtask = std::env::current_exe()
        .map_err(|e| Failure::new(format!("cannot find the xtask executable: {e}")))?;
    for (from, name) in [
        (&built.agentrl, "agentrl"),
        (&built.cuda_tests, "cuda-tests"),
        (&xtask, "xtask"),
    ] {
        let to = dir.join(name);
        fs::copy(from, &to).map_err(|e| {
            Failure::new(format!(
                "copying {} to {}: {e}",
                from.display(),
                to.display()
            ))
        })?;
    }
    println!(
        "packed into {}; on the GPU machine, from the repository root:\n  \
         LD_LIBRARY_PATH=<libtorch>/lib {}/xtask gpu-check --prebuilt {}",
        dir.display(),
        dir.display(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_parse_and_nonsense_is_refused() {
        let o = parse(&[]).expect("no arguments");
        assert!(o.pack.is_none() && o.prebuilt.is_none() && o.rounds == 2 && o.steps == 4);
        let o = parse(&args(&["--prebuilt", "p", "--rounds", "1", "--steps", "3"])).expect("valid");
        assert!(o.prebuilt == Some(PathBuf::from("p")) && o.rounds == 1 && o.steps == 3);
        for bad in [
            &["--pack"][..],
            &["--steps", "1"],
            &["--rounds", "0"],
            &["--pack", "a", "--prebuilt", "b"],
            &["--gpu"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} was accepted");
        }
    }
}
