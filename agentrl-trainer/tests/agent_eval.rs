//! `agentrl eval --endpoint` and `--reference`: envs played through any OpenAI-compatible chat
//! endpoint with native tools — a scripted server answering in OpenAI's exact JSON (tool
//! calls, a malformed call, server errors that the client retries, an API key), and
//! `agentrl serve` — and the same report for the reference solvers.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentrl_core::{Outcome, SamplingParams};
use agentrl_policy::{HttpPolicy, HttpPolicyConfig};
use agentrl_trainer::agent_eval::{Agent, SuiteOptions, evaluate_agent};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

/// What the scripted server saw.
#[derive(Default)]
struct Script {
    requests: AtomicUsize,
    failures_left: AtomicUsize,
}

/// A chat completion in OpenAI's wire format: `message` with `finish_reason`.
fn completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-9xYz",
        "object": "chat.completion",
        "created": 1_733_000_000,
        "model": "scripted-1",
        "system_fingerprint": "fp_0123",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}
    })
}

/// The scripted agent: calls the calculator on the user's expression (first with malformed
/// arguments when the expression contains a 7, then properly once the env has answered the
/// malformed call), then answers with the tool's result; refuses requests without the key;
/// fails the first requests with 503 so the client has to retry.
async fn chat(
    State(script): State<Arc<Script>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    script.requests.fetch_add(1, Ordering::Relaxed);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer sekret") {
        let error = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}});
        return (StatusCode::UNAUTHORIZED, Json(error));
    }
    let left = script.failures_left.load(Ordering::Relaxed);
    if left > 0 {
        script.failures_left.store(left - 1, Ordering::Relaxed);
        let error =
            json!({"error": {"message": "The server is overloaded", "type": "server_error"}});
        return (StatusCode::SERVICE_UNAVAILABLE, Json(error));
    }
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "function" && t["function"]["name"] == "calculator"),
        "no calculator tool offered: {body}"
    );
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let malformed_tries = messages.iter().filter(|m| m["role"] == "tool").count();
    let reply = match last["role"].as_str() {
        Some("tool") if malformed_tries == 1 && text(&last).contains("arguments") => {
            // The malformed call was answered with an error: try again properly.
            tool_call(&expression(&messages), "call_retry")
        }
        Some("tool") => json!({"role": "assistant", "content": text(&last).trim()}),
        _ => {
            let expr = expression(&messages);
            if expr.contains('7') {
                // A malformed call: arguments that are not JSON.
                json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": "call_bad",
                        "type": "function",
                        "function": {"name": "calculator", "arguments": "{\"expression\": "}
                    }]
                })
            } else {
                tool_call(&expr, "call_1")
            }
        }
    };
    let finish = if reply["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    (StatusCode::OK, Json(completion(reply, finish)))
}

fn text(message: &Value) -> String {
    message["content"].as_str().unwrap_or("").to_string()
}

/// The expression of the task's "Compute EXPR" user message.
fn expression(messages: &[Value]) -> String {
    messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(text)
        .and_then(|t| t.strip_prefix("Compute ").map(str::to_string))
        .unwrap_or_default()
}

fn tool_call(expr: &str, id: &str) -> Value {
    json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": id,
            "type": "function",
            "function": {
                "name": "calculator",
                "arguments": json!({"expression": expr}).to_string()
            }
        }]
    })
}

/// Serves `app` on a free port of 127.0.0.1; returns its address.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Plays the first `tasks` test tasks of `arith-calc` with `agent`, `concurrency` at once.
async fn play_arith(
    agent: &Agent,
    tasks: usize,
    concurrency: usize,
) -> (
    agentrl_trainer::eval::EvalReport,
    Vec<agentrl_core::Trajectory>,
) {
    let envs = vec![agentrl_env::lookup("arith-calc").unwrap()];
    let options = SuiteOptions {
        tasks_per_env: tasks,
        samples: 1,
        concurrency,
    };
    evaluate_agent(agent, &envs, &options).await.unwrap()
}

/// Starts the scripted server; returns its `/v1` URL and its script.
async fn scripted_server(failures: usize) -> (String, Arc<Script>) {
    let script = Arc::new(Script::default());
    script.failures_left.store(failures, Ordering::Relaxed);
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(Arc::clone(&script));
    let addr = serve(app).await;
    (format!("http://{addr}/v1"), script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_endpoint_solves_arith_with_native_tool_calls() {
    let (url, script) = scripted_server(2).await;
    let mut config = HttpPolicyConfig::new(&url, "scripted-1");
    config.api_key = Some("sekret".into());
    config.initial_backoff = std::time::Duration::from_millis(5);
    let agent = Agent::endpoint(HttpPolicy::new(config).unwrap(), SamplingParams::greedy(64));
    let (report, episodes) = play_arith(&agent, 12, 4).await;
    assert_eq!(report.tasks, 12);
    assert_eq!(report.success_rate, 1.0, "{}", report.markdown_table());
    let malformed: Vec<_> = episodes
        .iter()
        .filter(|e| e.turns.iter().any(|t| t.invalid_action.is_some()))
        .collect();
    for episode in &episodes {
        assert_eq!(episode.outcome, Outcome::Completed);
        assert!(episode.tool_calls >= 1, "{episode:?}");
        assert!(
            episode
                .turns
                .iter()
                .all(|t| t.policy_name.as_deref() == Some("scripted-1"))
        );
    }
    assert!(
        !malformed.is_empty(),
        "no task had a 7 in it, so the malformed call was never tried"
    );
    assert!(report.invalid_actions_per_episode > 0.0);
    assert!(script.requests.load(Ordering::Relaxed) >= 2 * 12 + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_is_an_unsolved_episode_not_a_crash() {
    let mut config = HttpPolicyConfig::new("http://127.0.0.1:9", "nobody");
    config.max_retries = 0;
    let agent = Agent::endpoint(HttpPolicy::new(config).unwrap(), SamplingParams::greedy(16));
    let (report, episodes) = play_arith(&agent, 2, 2).await;
    assert_eq!((report.tasks, report.success_rate), (2, 0.0));
    for episode in &episodes {
        assert_eq!(episode.outcome, Outcome::EnvError);
        let why = episode.turns[0].invalid_action.clone().unwrap_or_default();
        assert!(why.contains("127.0.0.1:9"), "{why}");
    }
}

/// A server with a small context: it calls the calculator on the first request, then refuses
/// the longer conversation with vLLM's HTTP 400.
async fn short_context_chat(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.iter().any(|m| m["role"] == "tool") {
        let error = json!({
            "object": "error",
            "message": "This model's maximum context length is 64 tokens. However, you \
                        requested 90 tokens (74 in the messages, 16 in the completion). Please \
                        reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": null,
            "code": 400
        });
        return (StatusCode::BAD_REQUEST, Json(error));
    }
    let call = tool_call(&expression(&messages), "call_1");
    (StatusCode::OK, Json(completion(call, "tool_calls")))
}

/// A conversation that outgrows the endpoint's context ends truncated with the turns it had,
/// as an in-process rollout ends at `max_seq_len`; it is not an env error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_over_the_endpoints_context_is_truncated_not_an_env_error() {
    let app = axum::Router::new().route("/v1/chat/completions", post(short_context_chat));
    let addr = serve(app).await;
    let agent = Agent::endpoint(
        HttpPolicy::new(HttpPolicyConfig::new(format!("http://{addr}/v1"), "short")).unwrap(),
        SamplingParams::greedy(16),
    );
    let (report, episodes) = play_arith(&agent, 2, 2).await;
    assert_eq!((report.tasks, report.success_rate), (2, 0.0));
    for episode in &episodes {
        assert_eq!(episode.outcome, Outcome::Truncated, "{episode:?}");
        assert_eq!(episode.turns.len(), 1, "{episode:?}");
        assert_eq!(episode.tool_calls, 1);
        let last = episode.messages.last().unwrap();
        assert_eq!(last.role, agentrl_core::Role::Tool, "{episode:?}");
    }
}

/// The command line: the scripted server with a key from the environment, then the reference
/// solvers of every env.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eval_command_takes_an_endpoint_or_the_reference_solvers() {
    let (url, _script) = scripted_server(0).await;
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("eval");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["eval", "--endpoint", &url, "--model", "scripted-1"])
        .args(["--api-key-env", "SCRIPTED_KEY", "--suite", "arith-calc"])
        .args(["--tasks", "3", "--run-dir"])
        .arg(&run_dir)
        .env("SCRIPTED_KEY", "sekret")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| arith-calc | 3 | 1.000 |"), "{stdout}");
    let saved = std::fs::read_to_string(run_dir.join("samples/eval_endpoint.jsonl")).unwrap();
    assert_eq!(saved.lines().count(), 3);
    let metrics = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("\"label\":\"endpoint\""), "{metrics}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args([
            "eval",
            "--endpoint",
            &url,
            "--model",
            "x",
            "--suite",
            "arith-calc",
        ])
        .args(["--api-key-env", "NO_SUCH_VARIABLE_SET"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NO_SUCH_VARIABLE_SET"));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args([
            "eval",
            "--reference",
            "--suite",
            "all",
            "--tasks",
            "2",
            "--run-dir",
        ])
        .arg(dir.path().join("reference"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for id in agentrl_env::env_ids() {
        assert!(
            stdout.contains(&format!("| {id} | 2 | 1.000 |")),
            "{id}: {stdout}"
        );
    }

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["eval", "--suite", "all"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--endpoint URL"));
}

/// `agentrl serve` on a tiny tool-calling model is an endpoint like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentrl_serve_is_an_endpoint_too() {
    use tokio::io::AsyncBufReadExt;
    let models = common::tool_model::tool_models();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args([
            "serve",
            "--port",
            "0",
            "--served-model-name",
            "tiny",
            "--model",
        ])
        .arg(&models.tool)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(120), lines.next_line())
        .await
        .expect("agentrl serve printed nothing")
        .unwrap()
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    let agent = Agent::endpoint(
        HttpPolicy::new(HttpPolicyConfig::new(&url, "tiny")).unwrap(),
        SamplingParams::greedy(40),
    );
    let (report, episodes) = play_arith(&agent, 3, 3).await;
    assert_eq!(report.tasks, 3);
    for episode in &episodes {
        assert_ne!(episode.outcome, Outcome::EnvError, "{episode:?}");
        assert!(!episode.turns.is_empty());
        assert!(episode.messages.len() >= 2);
    }
    child.kill().await.unwrap();
}
