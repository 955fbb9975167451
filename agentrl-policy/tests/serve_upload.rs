//! `agentrl serve`'s weight uploads (`PUT /v1/weights/{version}/{file}` + `POST
//! /v1/load_weights {"upload"}`: checksum, file name, size cap, missing upload, old uploads
//! removed) and its vLLM/SGLang-compatible weight-update routes, over real HTTP.

#[path = "support/tool_model.rs"]
mod tool_model;

use std::sync::Arc;

use agentrl_core::Policy;
use agentrl_policy::http::{CHECKSUM_HEADER, hex};
use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::{ServeState, ServedModel, UploadStore, app};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tch::Device;
use tool_model::tool_models;

/// Serves the random tiny model with uploads capped at `cap` bytes per file.
async fn serve(cap: u64) -> (String, Arc<ServeState>, tempfile::TempDir) {
    let f = tool_models();
    let model = ServedModel::load(&f.random, None, None, Device::Cpu, Dtype::F32, 8, 0).unwrap();
    let uploads = tempfile::tempdir().unwrap();
    let store = UploadStore::new(Some(uploads.path().to_path_buf()), cap);
    let state = ServeState::with_options(model, None, store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(state.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), state, uploads)
}

async fn put(base: &str, path: &str, body: Vec<u8>, sha: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .put(format!("{base}{path}"))
        .header(CHECKSUM_HEADER, sha)
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn post(base: &str, path: &str, body: Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_checked_loaded_and_pruned() {
    let (base, state, uploads) = serve(64 << 20).await;
    let bytes = std::fs::read(&tool_models().tool).unwrap();
    let sha = hex(&Sha256::digest(&bytes));
    for version in [4, 5] {
        let (status, text) = put(
            &base,
            &format!("/v1/weights/{version}/w.safetensors"),
            bytes.clone(),
            &sha,
        )
        .await;
        assert_eq!(status, 200, "{text}");
    }
    let (status, text) = post(&base, "/v1/load_weights", json!({"upload": 5})).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(state.model.policy.version(), 5);
    assert!(
        !uploads.path().join("v4").exists(),
        "older uploads are removed"
    );
    assert!(uploads.path().join("v5/w.safetensors").is_file());

    // A wrong checksum is refused and nothing is kept.
    let wrong = hex(&Sha256::digest(b"something else"));
    let (status, text) = put(&base, "/v1/weights/6/w.safetensors", bytes.clone(), &wrong).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("checksum mismatch"), "{text}");
    let (status, text) = post(&base, "/v1/load_weights", json!({"upload": 6})).await;
    assert_eq!(status, 400, "{text}");
    // A bad file name, a missing checksum, a missing upload.
    let (status, text) = put(&base, "/v1/weights/6/..evil", bytes.clone(), &sha).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("bad file name"), "{text}");
    let r = reqwest::Client::new()
        .put(format!("{base}/v1/weights/6/w.safetensors"))
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let (status, text) = post(&base, "/v1/load_weights", json!({"upload": 99})).await;
    assert_eq!(status, 404, "{text}");
    // The size cap.
    let (small, _state, _dir) = serve(16).await;
    let (status, text) = put(&small, "/v1/weights/1/w.safetensors", bytes, &sha).await;
    assert_eq!(status, 413, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_and_sglang_routes_load_weights() {
    let (base, state, _dir) = serve(1 << 20).await;
    let path = tool_models().tool.clone();
    let (status, text) = post(
        &base,
        "/v1/load_lora_adapter",
        json!({"lora_name": "agentrl-v7", "lora_path": path}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("Success"), "{text}");
    assert_eq!(state.model.policy.version(), 7);
    let (status, _) = post(
        &base,
        "/v1/unload_lora_adapter",
        json!({"lora_name": "agentrl-v6"}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(
        &base,
        "/v1/unload_lora_adapter",
        json!({"lora_name": "agentrl-v7"}),
    )
    .await;
    assert_eq!(status, 400, "the merged adapter cannot be unloaded");

    let (status, text) = post(
        &base,
        "/update_weights_from_disk",
        json!({"model_path": path, "weight_version": "8"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["success"], true);
    assert_eq!(state.model.policy.version(), 8);
    let (status, text) = post(
        &base,
        "/update_weights_from_disk",
        json!({"model_path": "/no/such/file"}),
    )
    .await;
    assert_eq!(status, 400);
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["success"], false);

    let (status, text) = post(
        &base,
        "/load_lora_adapter",
        json!({"lora_name": "agentrl-v9", "lora_path": path}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["success"], true, "{answer}");
    assert!(
        answer["loaded_adapters"]["agentrl-v9"].is_string(),
        "{answer}"
    );
    assert_eq!(state.model.policy.version(), 9);
    let (status, _) = post(
        &base,
        "/unload_lora_adapter",
        json!({"lora_name": "agentrl-v8"}),
    )
    .await;
    assert_eq!(status, 200);
}
