//! `agentrl serve`'s limits over real HTTP on 127.0.0.1: a 100 MB body or a 10,000-deep JSON
//! array on every JSON route (OpenAI, SGLang, vLLM and the weight routes) is a 4xx with an
//! OpenAI-shaped error, oversized heads are refused, the server answers normally afterwards, and
//! the API key is required on every route but `/health` and must match exactly.

#[path = "../../agentrl-env/tests/common/hostile.rs"]
mod hostile;
#[path = "support/tool_model.rs"]
mod tool_model;

use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::ServedModel;
use reqwest::Method;
use serde_json::{Value, json};
use tch::Device;
use tool_model::{serve_on_loopback, tool_models};

/// Every route that reads a JSON body.
const JSON_ROUTES: [&str; 9] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/generate",
    "/v1/load_weights",
    "/v1/load_lora_adapter",
    "/v1/unload_lora_adapter",
    "/update_weights_from_disk",
    "/load_lora_adapter",
    "/unload_lora_adapter",
];

/// The random tiny model served on 127.0.0.1:0 (behind `api_key` when given).
async fn start(api_key: Option<&str>) -> String {
    let model = ServedModel::load(
        &tool_models().random,
        None,
        Some("tiny".into()),
        Device::Cpu,
        Dtype::F32,
        8,
        0,
    )
    .unwrap();
    serve_on_loopback(model, api_key).await.0
}

/// POSTs `body` to `route` with `key` as bearer token (if any); returns the status and the
/// JSON answer.
async fn post(base: &str, route: &str, key: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{base}{route}"))
        .json(body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A short greedy completion, which must succeed: the server still serves.
async fn still_serves(base: &str, key: Option<&str>) {
    let body = json!({"prompt": "Compute 6*7", "max_tokens": 3, "temperature": 0,
                      "ignore_eos": true});
    let (status, answer) = post(base, "/v1/completions", key, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["token_ids"].as_array().unwrap().len(),
        3
    );
}

/// The error message of an OpenAI-shaped error answer (empty when the answer has none).
fn message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_bodies_deep_json_and_oversized_heads_are_4xx_and_the_server_survives() {
    let base = start(None).await;
    still_serves(&base, None).await;
    for route in JSON_ROUTES {
        let url = format!("{base}{route}");
        hostile::assert_huge_body_refused(&url, &[]).await;
        let (status, answer) = hostile::assert_deep_json_refused(&url, &[]).await;
        assert_eq!(status, 400, "{route}: {answer}");
        // SGLang's routes answer in SGLang's shape.
        let text = answer.to_string();
        assert!(text.contains("invalid request body"), "{route}: {text}");
    }
    // Deep where any JSON is accepted or buffered (untagged prompts, `stop`, `tool_choice`):
    // the parser's recursion limit stops it.
    let deep = hostile::deep_array(hostile::DEEP);
    let nested = [
        ("/v1/completions", format!(r#"{{"prompt": {deep}}}"#)),
        (
            "/v1/completions",
            format!(r#"{{"prompt": "hi", "stop": {deep}}}"#),
        ),
        (
            "/v1/chat/completions",
            format!(
                r#"{{"messages": [{{"role": "user", "content": "hi"}}], "tool_choice": {deep}}}"#
            ),
        ),
        (
            "/generate",
            format!(r#"{{"input_ids": [1], "sampling_params": {{"stop": {deep}}}}}"#),
        ),
    ];
    for (route, body) in nested {
        let (status, answer) = hostile::assert_json_4xx(&format!("{base}{route}"), &[], body).await;
        assert_eq!(status, 400, "{route}: {answer}");
        assert!(
            message(&answer).contains("recursion limit"),
            "{route}: {answer}"
        );
        assert_eq!(answer["error"]["type"], "invalid_request_error");
    }
    hostile::assert_oversized_heads_refused(Method::POST, &format!("{base}/v1/completions"), &[])
        .await;
    hostile::assert_oversized_heads_refused(Method::GET, &format!("{base}/v1/models"), &[]).await;
    still_serves(&base, None).await;
    let health = reqwest::get(format!("{base}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_is_required_everywhere_but_health_and_must_match_exactly() {
    let key = "s3cret-key";
    let base = start(Some(key)).await;
    let completion = json!({"prompt": "hi", "max_tokens": 1});
    let wrong = [
        None,
        Some(""),
        Some("s3cret-ke"),
        Some("s3cret-keyy"),
        Some("S3cret-key"),
        Some("s3cret-kez"),
    ];
    for sent in wrong {
        for route in JSON_ROUTES {
            let (status, answer) = post(&base, route, sent, &completion).await;
            assert_eq!(status, 401, "{route} with {sent:?}: {answer}");
            assert!(message(&answer).contains("API key"), "{answer}");
        }
        let mut req = reqwest::Client::new().get(format!("{base}/v1/models"));
        if let Some(sent) = sent {
            req = req.bearer_auth(sent);
        }
        assert_eq!(req.send().await.unwrap().status(), 401, "{sent:?}");
    }
    // With the key, a huge body is still refused.
    let url = format!("{base}/v1/completions");
    let with_key = format!("Bearer {key}");
    hostile::assert_huge_body_refused(&url, &[("authorization", with_key.as_str())]).await;
    let health = reqwest::get(format!("{base}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    still_serves(&base, Some(key)).await;
}
