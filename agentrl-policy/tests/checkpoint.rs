//! The checkpoint pointer of a run directory (`checkpoints/latest.json`): a round trip, and
//! clear errors for a pointer at a missing file, outside the folder, or broken JSON.

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

#[test]
fn a_pointer_outside_the_checkpoints_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints/step-000002")).unwrap();
    std::fs::write(dir.path().join("outside.safetensors"), b"").unwrap();
    std::fs::write(
        dir.path().join("checkpoints/step-000002/model.safetensors"),
        b"",
    )
    .unwrap();
    for (file, ok) in [
        ("step-000002/model.safetensors", true),
        ("../outside.safetensors", false),
        ("/etc/hostname", false),
    ] {
        let latest = LatestCheckpoint {
            step: 2,
            version: 2,
            file: file.into(),
        };
        write_latest(dir.path(), &latest).unwrap();
        let read = read_latest(dir.path());
        assert_eq!(read.is_ok(), ok, "{file}: {read:?}");
        if !ok {
            let err = read.unwrap_err().to_string();
            assert!(err.contains("not a path inside"), "{err}");
        }
    }
}
