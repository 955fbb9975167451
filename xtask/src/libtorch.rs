//! Provisioning of libtorch 2.13.0 (what tch 0.26 expects) from the PyPI torch wheels.
//!
//! CPU layout: `.libtorch/cpu/{include,lib,build-version}`, cut out of the torch wheel plus the
//! two CUDA runtime libraries that `libtorch_cpu.so` needs to load (no `libtorch_cuda*.so`).
//! CUDA layout: a venv in `.libtorch/cuda` with `torch` installed; LIBTORCH is its
//! `site-packages/torch`. Both are built in a temporary folder inside `.libtorch/` and renamed
//! into place with a stamp file, so a re-run is instant and an interrupted run leaves nothing
//! half-made.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{self, Command};
use std::time::Instant;

use crate::{Failure, Result, run};

/// The libtorch version tch 0.26 builds against.
pub const TORCH_VERSION: &str = "2.13.0";

/// The CUDA runtime wheel pinned by torch 2.13.0's requirements (provides `libcudart.so.13`).
const CUDA_RUNTIME_PIN: &str = "nvidia-cuda-runtime==13.0.96";

/// The CUPTI wheel pinned by torch 2.13.0's requirements (provides `libcupti.so.13`).
const CUPTI_PIN: &str = "nvidia-cuda-cupti==13.0.85";

/// Name of the stamp file written last into a finished layout.
const STAMP_FILE: &str = ".xtask-stamp";

/// Python interpreter used for pip, venv and the wheel extraction.
const PYTHON: &str = "python3";

/// Extracts the CPU layout from the downloaded wheels: `python3 -c EXTRACT <wheels> <out>`.
const EXTRACT_PY: &str = r#"
import os, pathlib, shutil, sys, zipfile
wheels, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
libs = {
    "torch/lib/libc10.so", "torch/lib/libtorch_cpu.so", "torch/lib/libtorch.so",
    "torch/lib/libgomp.so.1",
    "nvidia/cu13/lib/libcudart.so.13", "nvidia/cu13/lib/libcupti.so.13",
}
found, headers = set(), 0
for whl in sorted(wheels.glob("*.whl")):
    print(f"  reading {whl.name}", flush=True)
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            name = info.filename
            if info.is_dir() or ".." in name.split("/"):
                continue
            if name in libs:
                target = out / "lib" / name.rsplit("/", 1)[1]
                found.add(name)
            elif name.startswith("torch/include/"):
                target = out / "include" / name[len("torch/include/"):]
                headers += 1
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            if name in libs:
                os.chmod(target, 0o755)
missing = sorted(libs - found)
if missing:
    sys.exit("error: the downloaded wheels lack " + ", ".join(missing))
if headers == 0:
    sys.exit("error: the torch wheel has no torch/include/ headers")
print(f"  extracted {len(found)} libraries and {headers} headers", flush=True)
"#;

/// Which libtorch build to provision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Headers and CPU libraries only (works without a GPU).
    Cpu,
    /// The full CUDA-enabled torch wheel in a venv.
    Cuda,
}

impl Layout {
    /// Folder name under `.libtorch/`.
    fn name(self) -> &'static str {
        match self {
            Layout::Cpu => "cpu",
            Layout::Cuda => "cuda",
        }
    }

    /// Expected content of the stamp file of a finished layout.
    fn stamp(self) -> String {
        format!(
            "layout={} torch=={TORCH_VERSION} {CUDA_RUNTIME_PIN} {CUPTI_PIN}\n",
            self.name()
        )
    }
}

/// The folder a layout is provisioned into: `<repo>/.libtorch/<cpu|cuda>`.
pub fn layout_dir(root: &Path, layout: Layout) -> PathBuf {
    root.join(".libtorch").join(layout.name())
}

/// Provisions `layout` if it is not there yet and returns the folder to use as LIBTORCH.
pub fn ensure(root: &Path, layout: Layout) -> Result<PathBuf> {
    let dest = layout_dir(root, layout);
    if let Some(libtorch) = finished(&dest, layout) {
        println!(
            "libtorch {TORCH_VERSION} ({} layout) is ready at {} (stamp present)",
            layout.name(),
            libtorch.display()
        );
        return Ok(libtorch);
    }
    let started = Instant::now();
    let base = dest
        .parent()
        .ok_or_else(|| Failure::new("internal error: the layout folder has no parent"))?;
    fs::create_dir_all(base).map_err(|e| io_failure("create", base, &e))?;
    remove_stale_temp_dirs(base);
    let temp = TempDir::new(base.join(format!(".tmp-{}-{}", layout.name(), process::id())))?;
    let staging = temp.path().join(layout.name());
    match layout {
        Layout::Cpu => build_cpu(temp.path(), &staging)?,
        Layout::Cuda => build_cuda(&staging)?,
    }
    let stamp = staging.join(STAMP_FILE);
    fs::write(&stamp, layout.stamp()).map_err(|e| io_failure("write", &stamp, &e))?;
    if dest.exists() {
        println!(
            "removing the unfinished or outdated {} (no matching stamp)",
            dest.display()
        );
        fs::remove_dir_all(&dest).map_err(|e| io_failure("remove", &dest, &e))?;
    }
    fs::rename(&staging, &dest).map_err(|e| io_failure("move the new layout to", &dest, &e))?;
    drop(temp);
    let libtorch = finished(&dest, layout).ok_or_else(|| {
        Failure::new(format!(
            "{} was provisioned but does not look like libtorch; delete it and run \
             `cargo xtask setup` again",
            dest.display()
        ))
    })?;
    println!(
        "libtorch {TORCH_VERSION} ({} layout) provisioned at {} in {:.1}s",
        layout.name(),
        libtorch.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(libtorch)
}

/// The LIBTORCH folder of a finished layout at `dest`, or None if it is missing or unfinished.
fn finished(dest: &Path, layout: Layout) -> Option<PathBuf> {
    let stamp = fs::read_to_string(dest.join(STAMP_FILE)).ok()?;
    if stamp != layout.stamp() {
        return None;
    }
    let libtorch = match layout {
        Layout::Cpu => dest.to_path_buf(),
        Layout::Cuda => venv_torch_dir(dest)?,
    };
    libtorch
        .join("lib")
        .join("libtorch_cpu.so")
        .is_file()
        .then_some(libtorch)
}

/// Builds the CPU layout into `staging`, downloading wheels into `temp/wheels`.
fn build_cpu(temp: &Path, staging: &Path) -> Result<()> {
    let wheels = temp.join("wheels");
    println!("downloading the torch {TORCH_VERSION} and CUDA runtime wheels (about 540 MB)");
    let mut download = Command::new(PYTHON);
    download
        .args(["-m", "pip", "download", "--no-deps", "-d"])
        .arg(&wheels)
        .arg(format!("torch=={TORCH_VERSION}"))
        .args([CUDA_RUNTIME_PIN, CUPTI_PIN]);
    run("pip download of the torch wheels", &mut download).map_err(|f| {
        Failure::new(format!(
            "{}; setup needs python3 with pip (Debian: apt-get install python3-pip) and access \
             to the Python package index",
            f.message
        ))
    })?;
    println!(
        "extracting headers and CPU libraries into {}",
        staging.display()
    );
    let mut extract = Command::new(PYTHON);
    extract.arg("-c").arg(EXTRACT_PY).arg(&wheels).arg(staging);
    println!("(the extraction script is embedded in xtask/src/libtorch.rs)");
    extract_status(&mut extract)?;
    let version = staging.join("build-version");
    fs::write(&version, TORCH_VERSION).map_err(|e| io_failure("write", &version, &e))?;
    Ok(())
}

/// Runs the extraction script without echoing its (long) source.
fn extract_status(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().map_err(|e| {
        Failure::new(format!(
            "wheel extraction: could not start {PYTHON}: {e}; install Python 3"
        ))
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "wheel extraction failed ({status}); see the message above"
        )))
    }
}

/// Builds the CUDA layout: a venv at `staging` with torch installed.
fn build_cuda(staging: &Path) -> Result<()> {
    println!("creating a venv and installing torch {TORCH_VERSION} with CUDA (about 2.7 GB)");
    let mut venv = Command::new(PYTHON);
    venv.args(["-m", "venv"]).arg(staging);
    run("creation of the venv", &mut venv).map_err(|f| {
        Failure::new(format!(
            "{}; setup needs python3 with the venv module (Debian: apt-get install python3-venv)",
            f.message
        ))
    })?;
    let mut install = Command::new(staging.join("bin").join("python"));
    install
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .arg(format!("torch=={TORCH_VERSION}"));
    run("pip install of torch", &mut install).map_err(|f| {
        Failure::new(format!(
            "{}; check access to the Python package index and the free disk space (4.7 GB)",
            f.message
        ))
    })?;
    if venv_torch_dir(staging).is_none() {
        return Err(Failure::new(format!(
            "torch was installed but no site-packages/torch/lib/libtorch_cpu.so exists under {}",
            staging.display()
        )));
    }
    Ok(())
}

/// The `lib/pythonX.Y/site-packages/torch` folder of the venv at `venv`, if torch is there.
fn venv_torch_dir(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&lib)
        .ok()?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("site-packages").join("torch"))
        .filter(|torch| torch.join("lib").join("libtorch_cpu.so").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// Removes `.tmp-*` folders in `base` left by interrupted runs whose process is gone.
fn remove_stale_temp_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".tmp-"))
            .and_then(|rest| rest.rsplit('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == process::id() || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        println!(
            "removing {} left by an interrupted setup",
            entry.path().display()
        );
        if let Err(e) = fs::remove_dir_all(entry.path()) {
            eprintln!("warning: could not remove {}: {e}", entry.path().display());
        }
    }
}

/// A temporary folder removed when dropped (also on failure).
struct TempDir(PathBuf);

impl TempDir {
    /// Creates the folder `path` (removing an old one of the same name first).
    fn new(path: PathBuf) -> Result<Self> {
        if path.exists() {
            fs::remove_dir_all(&path).map_err(|e| io_failure("remove", &path, &e))?;
        }
        fs::create_dir_all(&path).map_err(|e| io_failure("create", &path, &e))?;
        Ok(Self(path))
    }

    /// The folder's path.
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    /// Removes the folder, warning if that fails.
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("warning: could not remove {}: {e}", self.0.display());
        }
    }
}

/// A failure for a file-system operation, with a hint.
fn io_failure(what: &str, path: &Path, e: &std::io::Error) -> Failure {
    Failure::new(format!(
        "setup: could not {what} {}: {e}; check the permissions and free disk space of .libtorch/",
        path.display()
    ))
}
