//! Weight pushes per server mode (`[[pipeline.rollout_fleet]]`): HTTP uploads to two in-process
//! `agentrl serve`s; the exact request bodies of the vLLM and SGLang modes against a recording
//! stub; a server that keeps failing is dropped from the router while the push goes on; when
//! none is left the push fails.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrl_core::Policy;
use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::ServedModel;
use agentrl_trainer::config::{PushMode, RolloutServerConfig};
use agentrl_trainer::learner::Learner;
use agentrl_trainer::run::Run;
use agentrl_trainer::weight_sync::{PushRetry, ServerPush};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use serde_json::{Value, json};
use tch::Device;

/// A config entry for `url` pushed with `mode`.
fn entry(url: &str, mode: PushMode, prefix: Option<&str>) -> RolloutServerConfig {
    RolloutServerConfig {
        url: url.to_string(),
        push: mode,
        api_key_env: None,
        path_prefix: prefix.map(PathBuf::from),
    }
}

/// Config places for `servers`.
fn fleet(servers: Vec<RolloutServerConfig>) -> Vec<(String, RolloutServerConfig)> {
    servers
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("pipeline.rollout_fleet[{i}]"), s))
        .collect()
}

/// A tiny learner, its run directory, and its initial weights saved as a checkpoint there.
fn tiny_learner() -> (tempfile::TempDir, Learner, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(common::tiny_config(1), dir.path()).unwrap();
    let learner = run.learner(1e-3, None).unwrap();
    let ckpt = dir.path().join("checkpoints/init.safetensors");
    std::fs::create_dir_all(ckpt.parent().unwrap()).unwrap();
    learner.save(&ckpt).unwrap();
    (dir, learner, ckpt)
}

fn quick() -> PushRetry {
    PushRetry {
        attempts: 2,
        backoff: Duration::from_millis(10),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_reach_two_servers_and_a_bad_checksum_is_refused() {
    let (dir, learner, ckpt) = tiny_learner();
    let mut urls = Vec::new();
    let mut states = Vec::new();
    for seed in 0..2 {
        let model = ServedModel::load(&ckpt, None, None, Device::Cpu, Dtype::F32, 8, seed).unwrap();
        let (url, state) = common::tool_model::serve_on_loopback(model, None).await;
        urls.push(url);
        states.push(state);
    }
    let servers = fleet(
        urls.iter()
            .map(|u| entry(u, PushMode::AgentrlUpload, None))
            .collect(),
    );
    let out = dir.path().join("rollout-weights");
    let (push, router) = ServerPush::new(&servers, None, learner.spec(), &out, "tiny").unwrap();
    let push = push.with_retry(quick());
    for version in 1..=2 {
        push.publish(&learner, version).await.unwrap();
    }
    for state in &states {
        assert_eq!(state.model.policy.version(), 2);
    }
    assert_eq!(router.version(), 2);
    assert_eq!(push.dropped(), 0);

    // A corrupted checksum is refused with a 400 that says so.
    let bytes = std::fs::read(out.join("v000002.safetensors")).unwrap();
    let answer = reqwest::Client::new()
        .put(format!("{}/v1/weights/3/w.safetensors", urls[0]))
        .header("x-content-sha256", "0".repeat(64))
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    assert!(answer.text().await.unwrap().contains("checksum mismatch"));
}

/// What the stub saw: (path, JSON body).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// Records the request; SGLang routes answer `success` = `ok`, vLLM's a text line (500 when
/// not `ok`).
async fn stub(
    State((seen, ok)): State<(Seen, bool)>,
    uri: Uri,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push((uri.path().to_string(), body));
    if uri.path().starts_with("/v1/") {
        return match ok {
            true => "Success: done.".into_response(),
            false => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        };
    }
    Json(json!({"success": ok, "message": if ok { "ok" } else { "disk full" }})).into_response()
}

/// A recording stub on 127.0.0.1:0.
async fn start_stub(ok: bool) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let router = axum::Router::new()
        .fallback(axum::routing::post(stub))
        .with_state((seen.clone(), ok));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_and_sglang_modes_send_the_documented_bodies() {
    let (dir, learner, _) = tiny_learner();
    let mut stubs = Vec::new();
    for mode in [
        PushMode::VllmLora,
        PushMode::SglangDisk,
        PushMode::SglangLora,
    ] {
        let (url, seen) = start_stub(true).await;
        stubs.push((entry(&url, mode, Some("/mnt/shared/run")), seen));
    }
    let servers = fleet(stubs.iter().map(|(e, _)| e.clone()).collect());
    let out = dir.path().join("rollout-weights");
    let (push, _router) = ServerPush::new(&servers, None, learner.spec(), &out, "tiny").unwrap();
    push.publish(&learner, 1).await.unwrap();
    push.publish(&learner, 2).await.unwrap();
    let seen = |i: usize| stubs[i].1.lock().unwrap().clone();
    let p = |v: u64| format!("/mnt/shared/run/v{v:06}.safetensors");
    let lora = |route: &str| {
        vec![
            (
                route.to_string(),
                json!({"lora_name": "agentrl-v1", "lora_path": p(1)}),
            ),
            (
                route.to_string(),
                json!({"lora_name": "agentrl-v2", "lora_path": p(2)}),
            ),
        ]
    };
    let mut vllm = lora("/v1/load_lora_adapter");
    vllm.push((
        "/v1/unload_lora_adapter".into(),
        json!({"lora_name": "agentrl-v1"}),
    ));
    assert_eq!(seen(0), vllm);
    assert_eq!(
        seen(1),
        vec![
            (
                "/update_weights_from_disk".to_string(),
                json!({"model_path": p(1), "weight_version": "1"})
            ),
            (
                "/update_weights_from_disk".to_string(),
                json!({"model_path": p(2), "weight_version": "2"})
            ),
        ]
    );
    let mut sglang = lora("/load_lora_adapter");
    sglang.push((
        "/unload_lora_adapter".into(),
        json!({"lora_name": "agentrl-v1"}),
    ));
    assert_eq!(seen(2), sglang);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_server_is_dropped_and_none_left_is_an_error() {
    let (dir, learner, _) = tiny_learner();
    let (good, _) = start_stub(true).await;
    let (bad, bad_seen) = start_stub(false).await;
    let (bad_vllm, _) = start_stub(false).await;
    let servers = fleet(vec![
        entry(&good, PushMode::SglangDisk, None),
        entry(&bad, PushMode::SglangDisk, None),
        entry(&bad_vllm, PushMode::VllmLora, None),
    ]);
    let out = dir.path().join("rollout-weights");
    let (push, router) = ServerPush::new(&servers, None, learner.spec(), &out, "tiny").unwrap();
    let push = push.with_retry(quick());
    push.publish(&learner, 1).await.unwrap();
    assert_eq!(push.dropped(), 2);
    assert_eq!(push.live_servers(), vec![good.clone()]);
    assert_eq!(router.live_backends(), vec![0]);
    assert_eq!(bad_seen.lock().unwrap().len(), 2, "retried once");
    push.publish(&learner, 2).await.unwrap();
    assert_eq!(
        bad_seen.lock().unwrap().len(),
        2,
        "a dropped server gets no more pushes"
    );

    let servers = fleet(vec![entry(&bad, PushMode::SglangDisk, None)]);
    let (push, _router) = ServerPush::new(&servers, None, learner.spec(), &out, "tiny").unwrap();
    let err = push
        .with_retry(quick())
        .publish(&learner, 3)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no rollout server is left") && err.contains("disk full"),
        "{err}"
    );
}
