//! Checkpoints: safetensors files written atomically, and the `checkpoints/latest.json` pointer
//! of a run directory, which trainers write for resuming and `agentrl serve` reads to find a
//! run's newest weights.
//!
//! `latest.json` names the newest weights file of a run, relative to its `checkpoints/` folder
//! (`step-000020/model.safetensors`). The trainer's checkpoint directories around it, with the
//! optimiser state and everything else a resumed run needs, are `agentrl-trainer`'s.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use tch::nn;

/// Saves all variables of `vs` as safetensors at `path` via a temporary file and a rename, so
/// a crash never leaves a half-written checkpoint under the final name.
pub fn save_var_store(vs: &nn::VarStore, path: &Path) -> Result<()> {
    write_atomically(path, |tmp| vs.save(tmp))
}

/// Saves named tensors as safetensors at `path`, atomically like [`save_var_store`].
pub fn save_tensors(tensors: &[(String, tch::Tensor)], path: &Path) -> Result<()> {
    write_atomically(path, |tmp| tch::Tensor::write_safetensors(tensors, tmp))
}

/// Has `write` write a temporary file beside `path` (creating its folder), then renames it to
/// `path`.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), tch::TchError>,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "checkpoint.safetensors".into());
    let tmp = dir.join(format!(".{file_name}.tmp.safetensors"));
    write(&tmp).map_err(|e| Error::Policy(format!("writing checkpoint {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("renaming checkpoint to", path, e))
}

/// Where training stopped: the pointer file `checkpoints/latest.json` of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatestCheckpoint {
    /// RL steps completed.
    pub step: usize,
    /// Policy version of the weights.
    pub version: u64,
    /// Checkpoint file name inside the checkpoints folder.
    pub file: String,
}

/// The checkpoints folder of a run directory.
pub fn checkpoint_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("checkpoints")
}

/// Records `latest` atomically.
pub fn write_latest(run_dir: &Path, latest: &LatestCheckpoint) -> Result<()> {
    let dir = checkpoint_dir(run_dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("creating", &dir, e))?;
    let path = dir.join("latest.json");
    let tmp = dir.join(".latest.json.tmp");
    let text = serde_json::to_string_pretty(latest)
        .map_err(|e| Error::json("latest checkpoint record", e))?;
    std::fs::write(&tmp, text).map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("renaming to", &path, e))
}

/// Reads `checkpoints/latest.json` of a run, if there is one.
pub fn read_latest(run_dir: &Path) -> Result<Option<(LatestCheckpoint, PathBuf)>> {
    let dir = checkpoint_dir(run_dir);
    let path = dir.join("latest.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    let latest: LatestCheckpoint =
        serde_json::from_str(&text).map_err(|e| Error::json(path.display().to_string(), e))?;
    let inside = std::path::Path::new(&latest.file)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(Error::Config(format!(
            "{} names {:?}, which is not a path inside the checkpoints folder",
            path.display(),
            latest.file
        )));
    }
    let file = dir.join(&latest.file);
    if !file.exists() {
        return Err(Error::Config(format!(
            "{} points at {}, which does not exist",
            path.display(),
            file.display()
        )));
    }
    Ok(Some((latest, file)))
}
