//! `agentrl chat`: a tiny random Llama saved here as GGUF (`Llama::save_gguf`), with a GPT-2
//! style vocabulary and a ChatML template in its metadata, answers (random text); a missing
//! model path is a clear error. An opt-in test asks the real SmolLM2 GGUF
//! (`AGENTRL_SMOLLM2_GGUF`). The command runs in process through
//! [`agentrl_policy::serve::chat::run`], which the `agentrl` binary calls.

use std::path::PathBuf;

use agentrl_policy::llama::Dtype;
use agentrl_policy::serve::chat::{ChatArgs, run};

#[path = "support/tiny_chat_gguf.rs"]
mod tiny_chat_gguf;

use tiny_chat_gguf::write_tiny_model;

/// `agentrl chat --model MODEL PROMPT --max-new-tokens N`: what it printed, or its error.
fn chat(model: impl Into<PathBuf>, prompt: &str, max_new_tokens: usize) -> Result<String, String> {
    let args = ChatArgs {
        model: model.into(),
        prompt: prompt.into(),
        max_new_tokens,
        dtype: Dtype::F32,
    };
    let mut out = Vec::new();
    run(&args, &mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn chat_with_a_tiny_random_gguf_model_prints_a_reply() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_tiny_model(dir.path());
    let stdout = chat(path, "hello the world", 8).unwrap();
    assert!(!stdout.trim().is_empty(), "no reply");
}

#[test]
fn chat_with_a_missing_model_is_a_clear_error() {
    let err = chat("/nonexistent/model.gguf", "hi", 128).unwrap_err();
    assert!(
        err.contains("/nonexistent/model.gguf") && err.contains("does not exist"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let err = chat(dir.path(), "hi", 128).unwrap_err();
    assert!(err.contains("config.json"), "{err}");
}

#[test]
#[ignore = "needs the SmolLM2 GGUF file: set AGENTRL_SMOLLM2_GGUF"]
fn smollm2_knows_the_capital_of_france() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let stdout = chat(path, "What is the capital of France?", 40).unwrap();
    assert!(stdout.contains("Paris"), "reply: {stdout}");
}
