//! Resumable checkpoints. After an RL checkpoint step N the learner writes
//! `checkpoints/step-N/`, a directory holding everything the run needs to go on as if it had
//! never stopped:
//!
//! - `model.safetensors`: the weights (all of them, or a LoRA model's adapters);
//! - `optimizer.safetensors`: AdamW's moments, step count and fp32 master weights;
//! - `critic.safetensors`, `critic-optimizer.safetensors`: PPO's critic and its optimiser;
//! - `state.json` ([`TrainState`]): the step and policy version, the index of the next rollout
//!   group (task draws and sampling seeds derive from it), the reward's running statistics,
//!   and how long `metrics.jsonl` and the TensorBoard event file were;
//! - `manifest.json`: every other file's size and SHA-256, written last.
//!
//! The directory is written as `.step-N.partial/` (each file fsynced), then renamed into place
//! and the folder fsynced, so a kill at any moment leaves either the whole checkpoint or a
//! partial folder that [`newest_checkpoint`] deletes. Resuming takes the newest checkpoint
//! whose manifest checks out, skipping (with a warning that names it) any that does not, and
//! [`rewind_run_files`] cuts `metrics.jsonl`, the samples and the TensorBoard file back to
//! that step, so every step appears once.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use agentrl_policy::checkpoint::{LatestCheckpoint, checkpoint_dir, read_latest, write_latest};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::critic::Critic;
use crate::learner::Learner;

/// The weights.
pub const MODEL_FILE: &str = "model.safetensors";
/// The policy optimiser's state.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// PPO's critic.
pub const CRITIC_FILE: &str = "critic.safetensors";
/// The critic optimiser's state.
pub const CRITIC_OPTIMIZER_FILE: &str = "critic-optimizer.safetensors";
/// The [`TrainState`].
pub const STATE_FILE: &str = "state.json";
/// Sizes and checksums of the other files.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The counters and positions of a run after a checkpoint step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// RL steps completed.
    pub step: usize,
    /// Policy version of the weights.
    pub version: u64,
    /// Index of the next rollout group: the producer's task stream and sampling seeds resume
    /// from it.
    pub next_group: u64,
    /// Length of `metrics.jsonl` after this step's record (`None`: unknown, nothing is cut).
    #[serde(default)]
    pub metrics_bytes: Option<u64>,
    /// The reward's state ([`agentrl_core::RewardFn::state`]), when it has one.
    #[serde(default)]
    pub reward_state: Option<serde_json::Value>,
    /// The TensorBoard event file and its length after this step, when one is written.
    #[serde(default)]
    pub tensorboard: Option<EventFilePosition>,
}

/// Where a TensorBoard event file stood.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventFilePosition {
    /// The event file's name (inside the run's TensorBoard folder).
    pub file: String,
    /// Its length in bytes.
    pub bytes: u64,
}

/// A checkpoint to resume from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumePoint {
    /// The checkpoint directory (`None` for an old weights-only checkpoint file).
    pub dir: Option<PathBuf>,
    /// The weights file.
    pub model: PathBuf,
    /// Counters and positions.
    pub state: TrainState,
}

impl ResumePoint {
    /// `name` inside the checkpoint directory, when the checkpoint has that file.
    pub fn file(&self, name: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(name))
            .filter(|p| p.is_file())
    }
}

/// One file's entry in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FileEntry {
    bytes: u64,
    sha256: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Manifest {
    /// Layout version of the checkpoint directory.
    format: u32,
    /// Every other file of the directory.
    files: BTreeMap<String, FileEntry>,
}

/// The directory name of the checkpoint after `step`.
pub fn step_dir_name(step: usize) -> String {
    format!("step-{step:06}")
}

/// The step of a checkpoint directory name (`step-000012` → 12).
fn parse_step_dir(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("step-")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Writes the checkpoint of `state.step` (see the module docs) and points
/// `checkpoints/latest.json` at its weights; returns its directory.
pub fn write_checkpoint(
    run_dir: &Path,
    state: &TrainState,
    learner: &Learner,
    critic: Option<&Critic>,
) -> Result<PathBuf> {
    let root = checkpoint_dir(run_dir);
    let name = step_dir_name(state.step);
    let tmp = root.join(format!(".{name}.partial"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io("removing", &tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io("creating", &tmp, e))?;
    learner.save(&tmp.join(MODEL_FILE))?;
    learner.save_optimizer(&tmp.join(OPTIMIZER_FILE))?;
    if let Some(critic) = critic {
        critic.save(&tmp.join(CRITIC_FILE))?;
        critic.save_optimizer(&tmp.join(CRITIC_OPTIMIZER_FILE))?;
    }
    let text = serde_json::to_vec_pretty(state).map_err(|e| Error::json("checkpoint state", e))?;
    let state_path = tmp.join(STATE_FILE);
    std::fs::write(&state_path, text).map_err(|e| Error::io("writing", &state_path, e))?;
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&tmp).map_err(|e| Error::io("listing", &tmp, e))? {
        let path = entry.map_err(|e| Error::io("listing", &tmp, e))?.path();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        sync_file(&path)?;
        files.insert(file_name, hash_file(&path)?);
    }
    let manifest = Manifest { format: 1, files };
    let text =
        serde_json::to_vec_pretty(&manifest).map_err(|e| Error::json("checkpoint manifest", e))?;
    let manifest_path = tmp.join(MANIFEST_FILE);
    std::fs::write(&manifest_path, text).map_err(|e| Error::io("writing", &manifest_path, e))?;
    sync_file(&manifest_path)?;
    sync_dir(&tmp)?;
    let dir = root.join(&name);
    if dir.exists() {
        // A checkpoint of the same step from before a rewind: this one replaces it.
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("removing", &dir, e))?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| Error::io("renaming checkpoint to", &dir, e))?;
    sync_dir(&root)?;
    write_latest(
        run_dir,
        &LatestCheckpoint {
            step: state.step,
            version: state.version,
            file: format!("{name}/{MODEL_FILE}"),
        },
    )?;
    Ok(dir)
}

/// The newest complete checkpoint of a run. Half-written (`.partial`) folders are deleted,
/// and a checkpoint whose manifest, sizes, checksums or state do not check out is skipped
/// with a warning naming it. A run whose only checkpoint is an old weights-only file
/// (`latest.json` naming a `.safetensors` file) resumes from that with fresh optimiser state;
/// `tasks_per_step` then places the task stream.
pub fn newest_checkpoint(run_dir: &Path, tasks_per_step: usize) -> Result<Option<ResumePoint>> {
    let root = checkpoint_dir(run_dir);
    if !root.is_dir() {
        return Ok(None);
    }
    let mut steps = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(|e| Error::io("listing", &root, e))? {
        let entry = entry.map_err(|e| Error::io("listing", &root, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with(".step-") && name.ends_with(".partial") {
            tracing::warn!(
                "removing {}: a checkpoint whose writing was interrupted",
                path.display()
            );
            std::fs::remove_dir_all(&path).map_err(|e| Error::io("removing", &path, e))?;
        } else if let Some(step) = parse_step_dir(&name)
            && path.is_dir()
        {
            steps.push((step, path));
        }
    }
    steps.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (step, dir) in steps {
        match verify(&dir, step) {
            Ok(state) => {
                return Ok(Some(ResumePoint {
                    model: dir.join(MODEL_FILE),
                    dir: Some(dir),
                    state,
                }));
            }
            Err(reason) => tracing::warn!("skipping checkpoint {}: {reason}", dir.display()),
        }
    }
    legacy_checkpoint(run_dir, tasks_per_step)
}

/// An old-style checkpoint: `latest.json` naming a weights file directly in `checkpoints/`.
fn legacy_checkpoint(run_dir: &Path, tasks_per_step: usize) -> Result<Option<ResumePoint>> {
    let Some((latest, model)) = read_latest(run_dir)? else {
        return Ok(None);
    };
    if latest.file.contains('/') {
        // Points into a step directory that did not verify: nothing complete to resume from.
        return Ok(None);
    }
    tracing::warn!(
        "resuming from {}, a weights-only checkpoint: the optimiser starts afresh and \
         metrics.jsonl keeps any steps written after it",
        model.display()
    );
    Ok(Some(ResumePoint {
        dir: None,
        model,
        state: TrainState {
            step: latest.step,
            version: latest.version,
            next_group: (latest.step as u64).saturating_mul(tasks_per_step as u64),
            metrics_bytes: None,
            reward_state: None,
            tensorboard: None,
        },
    }))
}

/// Checks a checkpoint directory against its manifest and reads its state.
fn verify(dir: &Path, step: usize) -> std::result::Result<TrainState, String> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let text =
        std::fs::read(&manifest_path).map_err(|e| format!("no readable {MANIFEST_FILE} ({e})"))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| format!("{MANIFEST_FILE} is not valid: {e}"))?;
    for required in [MODEL_FILE, OPTIMIZER_FILE, STATE_FILE] {
        if !manifest.files.contains_key(required) {
            return Err(format!("{MANIFEST_FILE} does not list {required}"));
        }
    }
    for (name, want) in &manifest.files {
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(format!(
                "{MANIFEST_FILE} names a file outside the checkpoint: {name}"
            ));
        }
        let got = hash_file(&dir.join(name)).map_err(|e| e.to_string())?;
        if got.bytes != want.bytes {
            return Err(format!(
                "{name} has {} bytes, the manifest says {}",
                got.bytes, want.bytes
            ));
        }
        if got.sha256 != want.sha256 {
            return Err(format!("{name} does not match its SHA-256 in the manifest"));
        }
    }
    let text = std::fs::read(dir.join(STATE_FILE)).map_err(|e| format!("{STATE_FILE}: {e}"))?;
    let state: TrainState =
        serde_json::from_slice(&text).map_err(|e| format!("{STATE_FILE} is not valid: {e}"))?;
    if state.step != step {
        return Err(format!(
            "{STATE_FILE} says step {}, the folder says {step}",
            state.step
        ));
    }
    Ok(state)
}

/// Cuts the run's records back to `state`: `metrics.jsonl` to its length then, the
/// `samples/rl_step_N.jsonl` files of later steps, and the TensorBoard event file to its
/// length then (event files started after it are removed).
pub fn rewind_run_files(run_dir: &Path, state: &TrainState, tb_dir: Option<&Path>) -> Result<()> {
    if let Some(bytes) = state.metrics_bytes {
        truncate_to(&run_dir.join("metrics.jsonl"), bytes, "metrics records")?;
    }
    let samples = run_dir.join("samples");
    if samples.is_dir() {
        for entry in std::fs::read_dir(&samples).map_err(|e| Error::io("listing", &samples, e))? {
            let path = entry.map_err(|e| Error::io("listing", &samples, e))?.path();
            let later = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("rl_step_"))
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|step| step > state.step);
            if later {
                std::fs::remove_file(&path).map_err(|e| Error::io("removing", &path, e))?;
            }
        }
    }
    if let (Some(tb), Some(position)) = (tb_dir, &state.tensorboard) {
        rewind_event_files(tb, position)?;
    }
    Ok(())
}

/// Truncates the checkpoint's event file and removes event files started after it.
fn rewind_event_files(tb_dir: &Path, position: &EventFilePosition) -> Result<()> {
    if position.file.contains('/') || position.file.contains('\\') {
        return Err(Error::Config(format!(
            "checkpoint state names TensorBoard file {:?}, not a file name",
            position.file
        )));
    }
    let started = |name: &str| -> Option<u64> {
        name.strip_prefix("events.out.tfevents.")?
            .split('.')
            .next()?
            .parse()
            .ok()
    };
    let Some(checkpoint_started) = started(&position.file) else {
        return Ok(());
    };
    truncate_to(
        &tb_dir.join(&position.file),
        position.bytes,
        "TensorBoard events",
    )?;
    if let Ok(entries) = std::fs::read_dir(tb_dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != position.file && started(&name).is_some_and(|s| s > checkpoint_started) {
                let path = entry.path();
                tracing::info!("removing {}: written after the checkpoint", path.display());
                std::fs::remove_file(&path).map_err(|e| Error::io("removing", &path, e))?;
            }
        }
    }
    Ok(())
}

/// Cuts `path` to `bytes` when it is longer (saying what was dropped); warns when shorter.
fn truncate_to(path: &Path, bytes: u64, what: &str) -> Result<()> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.len() > bytes {
        tracing::info!(
            "dropping {} bytes of {what} written after the checkpoint from {}",
            meta.len() - bytes,
            path.display()
        );
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io("opening", path, e))?;
        file.set_len(bytes)
            .and_then(|_| file.sync_all())
            .map_err(|e| Error::io("truncating", path, e))?;
    } else if meta.len() < bytes {
        tracing::warn!(
            "{} is shorter ({} bytes) than when the checkpoint was written ({bytes}); keeping it",
            path.display(),
            meta.len()
        );
    }
    Ok(())
}

/// Size and SHA-256 of a file.
fn hash_file(path: &Path) -> Result<FileEntry> {
    let mut file = File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Error::io("reading", path, e))?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        hasher.update(&buf[..n]);
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(FileEntry { bytes, sha256 })
}

/// Flushes a file's data to disk.
fn sync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io("syncing", path, e))
}

/// Flushes a folder's entries to disk (so a rename inside it survives a crash).
fn sync_dir(path: &Path) -> Result<()> {
    match File::open(path).and_then(|f| f.sync_all()) {
        Ok(()) => Ok(()),
        // Some filesystems refuse fsync on a directory; the rename is still atomic there.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
        Err(e) => Err(Error::io("syncing", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_folders_are_recognised() {
        assert_eq!(parse_step_dir("step-000012"), Some(12));
        assert_eq!(parse_step_dir("step-"), None);
        assert_eq!(parse_step_dir("step-12a"), None);
        assert_eq!(parse_step_dir("step-000012.safetensors"), None);
        assert_eq!(step_dir_name(7), "step-000007");
    }

    #[test]
    fn metrics_and_samples_are_cut_back_to_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = dir.path().join("metrics.jsonl");
        std::fs::write(&metrics, "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n").unwrap();
        let samples = dir.path().join("samples");
        std::fs::create_dir_all(&samples).unwrap();
        for step in [2, 4] {
            std::fs::write(samples.join(format!("rl_step_{step:06}.jsonl")), "").unwrap();
        }
        std::fs::write(samples.join("eval_eval.jsonl"), "").unwrap();
        let state = TrainState {
            step: 2,
            version: 2,
            next_group: 4,
            metrics_bytes: Some(22),
            reward_state: None,
            tensorboard: None,
        };
        rewind_run_files(dir.path(), &state, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&metrics).unwrap(),
            "{\"step\":1}\n{\"step\":2}\n"
        );
        assert!(samples.join("rl_step_000002.jsonl").exists());
        assert!(!samples.join("rl_step_000004.jsonl").exists());
        assert!(samples.join("eval_eval.jsonl").exists());
    }

    #[test]
    fn later_event_files_go_and_the_checkpoints_file_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let older = "events.out.tfevents.100.host.1";
        let current = "events.out.tfevents.200.host.2";
        let newer = "events.out.tfevents.300.host.3";
        for name in [older, current, newer] {
            std::fs::write(dir.path().join(name), [0u8; 64]).unwrap();
        }
        let position = EventFilePosition {
            file: current.into(),
            bytes: 16,
        };
        rewind_event_files(dir.path(), &position).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join(older)).unwrap().len(), 64);
        assert_eq!(
            std::fs::metadata(dir.path().join(current)).unwrap().len(),
            16
        );
        assert!(!dir.path().join(newer).exists());
        let escape = EventFilePosition {
            file: "../x".into(),
            bytes: 0,
        };
        assert!(rewind_event_files(dir.path(), &escape).is_err());
    }
}
