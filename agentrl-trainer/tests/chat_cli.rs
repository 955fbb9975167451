//! `agentrl chat`: a tiny random Llama saved here as GGUF (`Llama::save_gguf`), with a GPT-2 style vocabulary and
//! a ChatML template in its metadata, answers (random text) and exits 0; a missing model path
//! is a clear error. An opt-in test asks the real SmolLM2 GGUF (`AGENTRL_SMOLLM2_GGUF`).

use std::path::Path;
use std::process::Command;

use agentrl_policy::llama::{GgufPrecision, Llama, LlamaConfig};
use tch::{Device, nn};

#[path = "../../agentrl-policy/tests/support/tiny_vocab.rs"]
mod tiny_vocab;

/// Writes a one-layer random Llama with the tiny vocabulary and ChatML template; returns its path.
fn write_tiny_model(dir: &Path) -> std::path::PathBuf {
    let config = LlamaConfig::from_json_str(
        &format!(
            r#"{{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": {},
            "max_position_embeddings": 128, "tie_word_embeddings": false}}"#,
            tiny_vocab::tiny_vocab().0.len()
        ),
        "tiny-chat",
    )
    .unwrap();
    tch::manual_seed(17);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = Llama::new(&vs.root(), config).unwrap();
    let path = dir.join("tiny-chat.gguf");
    model
        .save_gguf(
            &vs,
            &path,
            GgufPrecision::F32,
            &tiny_vocab::tokenizer_meta(),
        )
        .unwrap();
    path
}

fn agentrl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

#[test]
fn chat_with_a_tiny_random_gguf_model_prints_a_reply() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_tiny_model(dir.path());
    let out = agentrl(&[
        "chat",
        "--model",
        path.to_str().unwrap(),
        "hello the world",
        "--max-new-tokens",
        "8",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.trim().is_empty(), "no reply; stderr: {stderr}");
}

#[test]
fn chat_with_a_missing_model_is_a_clear_error() {
    let out = agentrl(&["chat", "--model", "/nonexistent/model.gguf", "hi"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/model.gguf") && stderr.contains("does not exist"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = agentrl(&["chat", "--model", dir.path().to_str().unwrap(), "hi"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("config.json"), "{stderr}");
}

#[test]
#[ignore = "needs the SmolLM2 GGUF file: set AGENTRL_SMOLLM2_GGUF"]
fn smollm2_knows_the_capital_of_france() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let out = agentrl(&[
        "chat",
        "--model",
        &path,
        "What is the capital of France?",
        "--max-new-tokens",
        "40",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Paris"), "reply: {stdout}");
}
