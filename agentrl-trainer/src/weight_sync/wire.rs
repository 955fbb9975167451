//! The requests that hand one version of the weights to one server, per
//! [`PushMode`]: their exact bodies follow `agentrl serve`'s, vLLM's and SGLang's documented
//! APIs. Uploads stream each file from disk with its SHA-256 in the `x-content-sha256` header.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use agentrl_policy::http::{CHECKSUM_HEADER, hex};
use axum::body::Bytes;
use http_body::{Frame, SizeHint};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use crate::config::PushMode;

/// Bytes read from disk per uploaded chunk.
const CHUNK: usize = 1 << 20;

/// A server's HTTP endpoint for pushes (its own client: weight loads may take minutes).
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
}

/// What one push sends: the version, the weights' path as the server sees it, and the files
/// to upload (for uploads).
pub(super) struct Version<'a> {
    /// The policy version.
    pub number: u64,
    /// The weights' path on the server's file system (path modes).
    pub server_path: &'a Path,
    /// The files of the version on this machine (uploads).
    pub files: &'a [PathBuf],
}

/// The adapter name of version `n` for the LoRA modes.
pub(super) fn adapter_name(n: u64) -> String {
    format!("agentrl-v{n}")
}

impl Endpoint {
    /// An endpoint for `base` (a trailing `/` or `/v1` is dropped), sending `api_key` as a
    /// bearer token when set.
    pub fn new(base: &str, api_key: Option<String>) -> Result<Self, String> {
        let trimmed = base.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err("empty url".into());
        }
        let base = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(900))
            .connect_timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(Endpoint {
            http,
            base,
            api_key,
        })
    }

    /// Sends `request` (with the bearer token) and returns the answer's text on a 2xx.
    async fn send(&self, what: &str, request: reqwest::RequestBuilder) -> Result<String, String> {
        let request = match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| format!("{what}: {}", agentrl_core::with_causes(&e)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("{what}: reading the answer (HTTP {status}): {e}"))?;
        if status.is_success() {
            Ok(text)
        } else {
            Err(format!("{what}: HTTP {status}: {}", excerpt(&text)))
        }
    }

    /// POSTs `body` as JSON to `path`; the answer's text on a 2xx.
    async fn post(&self, path: &str, body: &Value) -> Result<String, String> {
        let url = format!("{}{path}", self.base);
        let what = format!("POST {url}");
        self.send(&what, self.http.post(&url).json(body)).await
    }

    /// POSTs to an SGLang route, whose JSON answer says `success` (and why not in `message` or
    /// `error_message`).
    async fn post_sglang(&self, path: &str, body: &Value) -> Result<(), String> {
        let text = self.post(path, body).await?;
        let answer: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "POST {path}: the answer is not JSON ({e}): {}",
                excerpt(&text)
            )
        })?;
        if answer["success"].as_bool() == Some(true) {
            return Ok(());
        }
        let why = answer["message"]
            .as_str()
            .or_else(|| answer["error_message"].as_str())
            .unwrap_or("no reason given");
        Err(format!("POST {path}: success is not true: {why}"))
    }

    /// Streams `file` to `PUT /v1/weights/{version}/{name}` with its SHA-256.
    async fn upload(&self, version: u64, file: &Path) -> Result<(), String> {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{}: not a plain file name", file.display()))?;
        let (len, sha) = sha256_file(file).await?;
        let url = format!("{}/v1/weights/{version}/{name}", self.base);
        let body = reqwest::Body::wrap(stream_file(file, len).await?);
        let request = self
            .http
            .put(&url)
            .header(CHECKSUM_HEADER, sha)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body);
        self.send(&format!("PUT {url}"), request).await.map(drop)
    }

    /// Hands `version` to the server the way `mode` says; `previous` is the adapter the LoRA
    /// modes unload afterwards (failing to unload it only warns).
    pub async fn push(
        &self,
        mode: PushMode,
        version: &Version<'_>,
        previous: Option<&str>,
    ) -> Result<(), String> {
        let n = version.number;
        match mode {
            PushMode::AgentrlPath => {
                let body = json!({"path": version.server_path, "version": n});
                self.post("/v1/load_weights", &body).await.map(drop)
            }
            PushMode::AgentrlUpload => {
                for file in version.files {
                    self.upload(n, file).await?;
                }
                let body = json!({"upload": n, "version": n});
                self.post("/v1/load_weights", &body).await.map(drop)
            }
            PushMode::VllmLora => {
                let load = json!({"lora_name": adapter_name(n), "lora_path": version.server_path});
                self.post("/v1/load_lora_adapter", &load).await?;
                if let Some(old) = previous.filter(|old| *old != adapter_name(n)) {
                    let unload = json!({"lora_name": old});
                    let done = self.post("/v1/unload_lora_adapter", &unload).await;
                    warn_unload(done.map(drop), old);
                }
                Ok(())
            }
            PushMode::SglangDisk => {
                let body =
                    json!({"model_path": version.server_path, "weight_version": n.to_string()});
                self.post_sglang("/update_weights_from_disk", &body).await
            }
            PushMode::SglangLora => {
                let load = json!({"lora_name": adapter_name(n), "lora_path": version.server_path});
                self.post_sglang("/load_lora_adapter", &load).await?;
                if let Some(old) = previous.filter(|old| *old != adapter_name(n)) {
                    let unload = json!({"lora_name": old});
                    warn_unload(self.post_sglang("/unload_lora_adapter", &unload).await, old);
                }
                Ok(())
            }
        }
    }
}

/// Warns when unloading the previous adapter failed (the new one is loaded: the push counts).
fn warn_unload(done: Result<(), String>, old: &str) {
    if let Err(e) = done {
        tracing::warn!("could not unload the previous adapter {old}: {e}");
    }
}

/// The first 300 characters of `text`.
fn excerpt(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        format!("{cut}...")
    } else {
        cut
    }
}

/// The length and SHA-256 (hex) of `file`, read in chunks.
async fn sha256_file(file: &Path) -> Result<(u64, String), String> {
    let mut f = tokio::fs::File::open(file)
        .await
        .map_err(|e| format!("opening {}: {e}", file.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut len = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, hex(&hasher.finalize())))
}

/// A request body that reads `file` (`len` bytes) chunk by chunk as the request is sent.
async fn stream_file(file: &Path, len: u64) -> Result<FileBody, String> {
    let mut f = tokio::fs::File::open(file)
        .await
        .map_err(|e| format!("opening {}: {e}", file.display()))?;
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let mut buf = vec![0u8; CHUNK];
            let chunk = match f.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => {
                    buf.truncate(n);
                    Ok(Bytes::from(buf))
                }
                Err(e) => Err(e),
            };
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    Ok(FileBody { rx, len })
}

/// The chunks of a file as an HTTP body of known length.
struct FileBody {
    rx: mpsc::Receiver<std::io::Result<Bytes>>,
    len: u64,
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}
