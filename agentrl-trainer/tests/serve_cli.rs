//! The `agentrl serve` command: it listens on the port it prints, guards its routes with
//! `--api-key`, answers with the served tiny model's tool calls, and names a missing model.

mod common;

use agentrl_core::{Message, SamplingParams};
use agentrl_policy::{HttpPolicy, HttpPolicyConfig};
use common::tool_model::{calculator, tool_models};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_command_listens_and_answers() {
    use tokio::io::AsyncBufReadExt;
    let f = tool_models();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args([
            "serve",
            "--port",
            "0",
            "--served-model-name",
            "cli",
            "--api-key",
            "sesame",
            "--model",
        ])
        .arg(&f.tool)
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
        .unwrap_or_else(|| panic!("no URL in {line:?}"));
    let web = reqwest::Client::new();
    let denied = web.get(format!("{url}/models")).send().await.unwrap();
    assert_eq!(denied.status().as_u16(), 401);
    let denied: Value = denied.json().await.unwrap();
    assert!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .contains("API key")
    );
    let models: Value = web
        .get(format!("{url}/models"))
        .bearer_auth("sesame")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "cli");
    let mut config = HttpPolicyConfig::new(url, "cli");
    config.api_key = Some("sesame".into());
    let remote = HttpPolicy::new(config).unwrap();
    let reply = remote
        .chat(
            &[Message::user("Compute 6*7")],
            &[calculator()],
            &SamplingParams::greedy(40),
        )
        .await
        .unwrap();
    assert_eq!(reply.message.tool_calls[0].function.name, "calculator");
    child.kill().await.unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            "no/such/model.safetensors",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no/such/model.safetensors"), "{stderr}");
}
