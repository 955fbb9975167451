//! Weights uploaded over HTTP, for trainers that share no file system with the server:
//! `PUT /v1/weights/{version}/{file}` streams one file (its SHA-256 in the
//! [`CHECKSUM_HEADER`] header, lowercase hex) into a directory the server owns; then
//! `POST /v1/load_weights {"upload": version}` loads that version (a PEFT adapter directory,
//! a directory holding `model.safetensors`, or a single safetensors file) and removes the
//! uploads of older versions.
//!
//! Refused with a 4xx: a file name that is not one plain name (`/`, `\`, `..`, a leading dot,
//! control characters; 400), a missing or malformed checksum header (400), a body whose
//! checksum differs (400, the file is discarded), a file over the size cap (413) and a load of
//! a version that was never uploaded or lacks a file (404 / 400).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::Shared;
use super::api::ApiError;

use crate::http::{CHECKSUM_HEADER, hex};

/// Default cap of one uploaded file: 64 GiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 30;

/// A PEFT adapter's config file name.
const ADAPTER_CONFIG: &str = "adapter_config.json";
/// A PEFT adapter's weights file name.
const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// A full model's single weights file name.
const MODEL_WEIGHTS: &str = "model.safetensors";

/// Where uploads go: one directory per version under `root`.
#[derive(Debug)]
pub struct UploadStore {
    root: PathBuf,
    owned: bool,
    max_file_bytes: u64,
    next_part: AtomicU64,
}

impl UploadStore {
    /// Uploads under `root` (kept when the server stops), or, with `None`, under a fresh
    /// directory in the system's temporary directory (removed when the store is dropped);
    /// files over `max_file_bytes` are refused.
    pub fn new(root: Option<PathBuf>, max_file_bytes: u64) -> Self {
        let owned = root.is_none();
        let root = root.unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            std::env::temp_dir().join(format!(
                "agentrl-serve-uploads-{}-{nanos}",
                std::process::id()
            ))
        });
        UploadStore {
            root,
            owned,
            max_file_bytes,
            next_part: AtomicU64::new(0),
        }
    }

    /// The directory uploads go to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The largest file accepted, in bytes.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The directory of `version`'s files.
    fn version_dir(&self, version: u64) -> PathBuf {
        self.root.join(format!("v{version}"))
    }

    /// What to load for uploaded `version`: the adapter or full-model directory, or its one
    /// safetensors file.
    pub fn resolve(&self, version: u64) -> Result<PathBuf, ApiError> {
        let dir = self.version_dir(version);
        if !dir.is_dir() {
            return Err(not_found(format!(
                "no upload of version {version}: PUT /v1/weights/{version}/FILE first"
            )));
        }
        if dir.join(ADAPTER_CONFIG).is_file() {
            if !dir.join(ADAPTER_WEIGHTS).is_file() {
                return Err(ApiError::bad(format!(
                    "upload {version} has {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS}"
                )));
            }
            return Ok(dir);
        }
        if dir.join(MODEL_WEIGHTS).is_file() {
            return Ok(dir);
        }
        let files = safetensors_in(&dir);
        match files.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(ApiError::bad(format!(
                "upload {version} holds no weights: upload {MODEL_WEIGHTS}, a PEFT adapter \
                 ({ADAPTER_CONFIG} + {ADAPTER_WEIGHTS}) or one .safetensors file"
            ))),
            _ => Err(ApiError::bad(format!(
                "upload {version} holds {} .safetensors files and no {MODEL_WEIGHTS}: which \
                 one to load is ambiguous",
                files.len()
            ))),
        }
    }

    /// Removes the uploads of versions older than `version`.
    pub fn prune_below(&self, version: u64) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let old = name
                .to_str()
                .and_then(|n| n.strip_prefix('v'))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|v| v < version);
            if old && let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::warn!(
                    "could not remove old upload {}: {e}",
                    entry.path().display()
                );
            }
        }
    }

    /// A fresh temporary name beside `target`.
    fn part_path(&self, target: &Path) -> PathBuf {
        let n = self.next_part.fetch_add(1, Ordering::Relaxed);
        let name = target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("upload");
        target.with_file_name(format!(".{name}.{n}.part"))
    }
}

impl Drop for UploadStore {
    fn drop(&mut self) {
        if self.owned && self.root.exists() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// The `.safetensors` files directly in `dir`, sorted.
fn safetensors_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "safetensors"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A 404 error.
fn not_found(message: String) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message,
    }
}

/// Checks that `name` is one plain file name: no separators, no `..`, no leading dot (the
/// server's temporary files start with one), no control characters, at most 255 bytes.
pub fn check_file_name(name: &str) -> Result<(), ApiError> {
    let bad = name.is_empty()
        || name.len() > 255
        || name.starts_with('.')
        || name.contains(['/', '\\'])
        || name.contains("..")
        || name.chars().any(char::is_control);
    if bad {
        return Err(ApiError::bad(format!(
            "bad file name {name:?}: send one plain file name (no `/`, `\\`, `..` or leading dot)"
        )));
    }
    Ok(())
}

/// The checksum the request announces, lowercased.
fn announced_checksum(headers: &HeaderMap) -> Result<String, ApiError> {
    let value = headers
        .get(CHECKSUM_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .ok_or_else(|| {
            ApiError::bad(format!(
                "missing {CHECKSUM_HEADER} header (the file's SHA-256, hex)"
            ))
        })?;
    if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad(format!(
            "{CHECKSUM_HEADER} must be 64 hex digits, got {value:?}"
        )));
    }
    Ok(value)
}

/// `PUT /v1/weights/{version}/{file}`: streams the body to the store, checks its size and
/// SHA-256, and keeps it as `file` of upload `version`.
pub async fn put_weights(
    State(s): State<Shared>,
    UrlPath((version, file)): UrlPath<(u64, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    check_file_name(&file)?;
    let expected = announced_checksum(&headers)?;
    let store = &s.uploads;
    let dir = store.version_dir(version);
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| ApiError::internal(format!("creating {}: {e}", dir.display())))?;
    let target = dir.join(&file);
    let part = store.part_path(&target);
    let written = write_part(&part, body, store.max_file_bytes).await;
    let (bytes, digest) = match written {
        Ok(done) => done,
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(e);
        }
    };
    if digest != expected {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(ApiError::bad(format!(
            "checksum mismatch for {file} of version {version}: {CHECKSUM_HEADER} says \
             {expected}, the body hashes to {digest}; the file was discarded"
        )));
    }
    tokio::fs::rename(&part, &target)
        .await
        .map_err(|e| ApiError::internal(format!("keeping {}: {e}", target.display())))?;
    tracing::info!("received {file} of version {version} ({bytes} bytes)");
    Ok(Json(
        json!({"version": version, "file": file, "bytes": bytes, "sha256": digest}),
    ))
}

/// Writes `body` to `part` chunk by chunk, hashing it; refuses more than `max` bytes.
async fn write_part(part: &Path, body: Body, max: u64) -> Result<(u64, String), ApiError> {
    let mut out = tokio::fs::File::create(part)
        .await
        .map_err(|e| ApiError::internal(format!("creating {}: {e}", part.display())))?;
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad(format!("reading the upload: {e}")))?;
        total += chunk.len() as u64;
        if total > max {
            return Err(ApiError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!("upload over the server's cap of {max} bytes per file"),
            });
        }
        hasher.update(&chunk);
        out.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal(format!("writing {}: {e}", part.display())))?;
    }
    out.flush()
        .await
        .map_err(|e| ApiError::internal(format!("writing {}: {e}", part.display())))?;
    Ok((total, hex(&hasher.finalize())))
}
