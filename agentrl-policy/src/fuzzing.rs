//! Entry points of the `cargo fuzz` targets under `fuzz/` at the repository root, and of the
//! replay test `tests/fuzz_regressions.rs`, which feeds them the committed corpus and every
//! crash found so far on stable Rust.
//!
//! Each function takes arbitrary bytes, drives one parser the way the library does on
//! untrusted input (model output, files downloaded with a model) and ignores the result: the
//! only failure is a panic, a hang or an unbounded allocation. Not part of the stable API.

use agentrl_core::{Message, TokenId, ToolCall, ToolSpec};

use crate::gguf::GgufFile;
use crate::hf::{ChatTemplate, GenerationDefaults, HfTokenizer, parse_tool_calls};
use crate::llama::{LlamaConfig, gguf_config};
use crate::{ChatFormat, TinyChatFormat, hf};

/// The largest rotary head size whose frequencies the `hf_config` target computes (a
/// config may declare any size; the frequencies of a huge one would only measure the allocator).
const MAX_FUZZ_HEAD_SIZE: usize = 1 << 16;

/// Hermes/Qwen and Llama 3 tool-call parsers on `data` as (lossy UTF-8) generated text.
pub fn tool_calls(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = hf::parse_hermes_tool_calls(&text).into_action("h");
    let _ = hf::parse_llama3_tool_calls(&text).into_action("l");
    let parsed = parse_tool_calls(&text);
    for call in &parsed.calls {
        let _ = call.parse_arguments();
    }
    let _ = parsed.into_action("call_");
}

/// The ids `data` stands for in [`chat_format`]: a byte below `0xF0` is that byte's id; `0xF0`
/// to `0xFE` are the ids from 256 up (the special tokens and a few past the vocabulary); `0xFF`
/// takes the next four bytes (little-endian) as any id.
pub fn token_ids(data: &[u8]) -> Vec<TokenId> {
    let mut ids = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            0..=0xEF => ids.push(TokenId::from(b)),
            0xF0..=0xFE => ids.push(256 + TokenId::from(b - 0xF0)),
            0xFF => {
                let mut raw = [0u8; 4];
                let n = rest.len().min(4);
                raw[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                ids.push(TokenId::from_le_bytes(raw));
            }
        }
    }
    ids
}

/// The tiny model's chat format parsing generated ids ([`token_ids`] of `data`) into an
/// assistant message, then rendering that message back.
pub fn chat_format(data: &[u8]) {
    let format = TinyChatFormat::new();
    let ids = token_ids(data);
    let parsed = format.parse_assistant(&ids, "call_");
    let _ = format.decode(&ids);
    let _ = format.render_assistant(&parsed.message);
}

/// The GGUF reader on `data` as a whole file, then what loading a model reads from it: the
/// Llama config, the tokenizer and the chat template, and every tensor's bytes.
pub fn gguf(data: &[u8]) {
    let Ok(file) = GgufFile::from_bytes(data.to_vec(), "fuzz.gguf") else {
        return;
    };
    let _ = file.version();
    for (key, _) in file.metadata() {
        let _ = file.get(key);
    }
    if let Ok(config) = gguf_config(&file) {
        llama_config_accessors(&config);
    }
    let _ = HfTokenizer::from_gguf(&file);
    if let Ok(template) = ChatTemplate::from_gguf(&file) {
        render_fixed(&template);
    }
    for info in file.tensors() {
        let _ = info.shape();
        let _ = file.tensor_bytes(&info.name);
        let _ = file.tensor_f32(&info.name);
    }
}

/// The safetensors header reader tch's `Tensor::read_safetensors` calls on a weights file
/// (`SafeTensors::deserialize`), then every tensor view it hands to libtorch.
pub fn safetensors_header(data: &[u8]) {
    let Ok(file) = safetensors::SafeTensors::deserialize(data) else {
        return;
    };
    for (name, view) in file.tensors() {
        let _ = (
            name.len(),
            view.dtype(),
            view.shape().len(),
            view.data().len(),
        );
    }
}

/// A Hugging Face `config.json` ([`LlamaConfig::from_json_str`]) and a
/// `generation_config.json` ([`GenerationDefaults::from_json_str`]) on the same text.
pub fn hf_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = LlamaConfig::from_json_str(&text, "config.json") {
        llama_config_accessors(&config);
    }
    let _ = GenerationDefaults::from_json_str(&text, "generation_config.json");
}

/// A `tokenizer_config.json` ([`ChatTemplate::from_tokenizer_config`]) and, when it compiles,
/// its template rendering a fixed conversation.
pub fn tokenizer_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(template) = ChatTemplate::from_tokenizer_config(&text) {
        render_fixed(&template);
    }
}

/// A chat template source ([`ChatTemplate::new`]) compiled and rendered with a fixed
/// conversation, with and without tools and generation prompt.
pub fn chat_template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(template) = ChatTemplate::new(&text, "<s>", "</s>") {
        render_fixed(&template);
    }
}

/// Calls what the loader calls on a validated config.
fn llama_config_accessors(config: &LlamaConfig) {
    let _ = (config.kv_heads(), config.qk_norm(), config.qkv_bias());
    let _ = config.o_bias();
    if config.validate().is_ok() && config.head_size() <= MAX_FUZZ_HEAD_SIZE {
        let _ = config.inv_freq();
        let _ = config.rope_attention_scaling();
    }
}

/// Renders a short conversation with a tool call, with and without tools.
fn render_fixed(template: &ChatTemplate) {
    let call = ToolCall::new(
        "call_0",
        "calculator",
        &serde_json::json!({"expression": "6*7"}),
    );
    let messages = [
        Message::system("You are a helpful assistant."),
        Message::user("Compute 6*7"),
        Message::assistant_tool_calls(None, vec![call]),
        Message::tool("call_0", "42"),
        Message::assistant("6*7 = 42"),
        Message::user("Thanks"),
    ];
    let tools = [ToolSpec::function(
        "calculator",
        "Evaluates an arithmetic expression.",
        serde_json::json!({
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"]
        }),
    )];
    let _ = template.render(&messages, &tools, true);
    let _ = template.render(&messages[..2], &[], false);
}
