//! The checkpoint pointer of a run directory (`checkpoints/latest.json`): a round trip, and
//! clear errors for a pointer at a missing file or broken JSON.

#![cfg(feature = "tch")]

use agentrl_policy::checkpoint::{LatestCheckpoint, read_latest, write_latest};

#[test]
fn the_latest_checkpoint_pointer_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read_latest(dir.path()).unwrap().is_none());
    let latest = LatestCheckpoint {
        step: 3,
        version: 4,
        file: "step-000003.safetensors".into(),
    };
    write_latest(dir.path(), &latest).unwrap();
    std::fs::write(dir.path().join("checkpoints/step-000003.safetensors"), b"").unwrap();
    let (read, file) = read_latest(dir.path()).unwrap().unwrap();
    assert_eq!(read, latest);
    assert_eq!(file, dir.path().join("checkpoints/step-000003.safetensors"));
}

#[test]
fn a_broken_checkpoint_pointer_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    std::fs::write(
        dir.path().join("checkpoints/latest.json"),
        r#"{"step": 5, "version": 5, "file": "step-000005.safetensors"}"#,
    )
    .unwrap();
    let err = read_latest(dir.path()).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");
    std::fs::write(dir.path().join("checkpoints/latest.json"), "{oops").unwrap();
    let err = read_latest(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("invalid JSON") && err.contains("latest.json"),
        "{err}"
    );
}
