//! A tiny GPT-2 style byte-level BPE vocabulary (3 control tokens, the 256 byte symbols, six
//! merges) and a ChatML template, as GGUF `tokenizer.*` metadata: shared by the GGUF tokenizer
//! tests, the `agentrl chat` and `agentrl serve` tests here and the Llama run tests of
//! agentrl-trainer.
#![allow(dead_code)]

use agentrl_policy::gguf::{MetaArray, MetaValue};

pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
    message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}\
    {{ '<|im_start|>assistant\\n' }}{% endif %}";

/// GPT-2's byte → printable character map.
pub fn byte_chars() -> Vec<char> {
    let printable = |b: u32| {
        (u32::from(b'!')..=u32::from(b'~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut extra = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap()
            }
        })
        .collect()
}

pub const MERGES: [&str; 6] = ["h e", "Ġ t", "Ġt he", "l l", "ll o", "Ġ w"];

/// Tokens (3 control tokens, 256 bytes, one per merge), merges and token types.
pub fn tiny_vocab() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    tokens.extend(byte_chars().into_iter().map(String::from));
    tokens.extend(MERGES.iter().map(|m| m.replace(' ', "")));
    let types = (0..tokens.len())
        .map(|i| if i < 3 { 3 } else { 1 })
        .collect();
    (
        tokens,
        MERGES.iter().map(|s| s.to_string()).collect(),
        types,
    )
}

/// Tokenizer and chat-template metadata.
pub fn tokenizer_meta() -> Vec<(String, MetaValue)> {
    let (tokens, merges, types) = tiny_vocab();
    vec![
        (
            "tokenizer.ggml.model".into(),
            MetaValue::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.tokens".into(),
            MetaValue::Array(MetaArray::String(tokens)),
        ),
        (
            "tokenizer.ggml.merges".into(),
            MetaValue::Array(MetaArray::String(merges)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            MetaValue::Array(MetaArray::I32(types)),
        ),
        ("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(2)),
        (
            "tokenizer.chat_template".into(),
            MetaValue::String(CHATML.into()),
        ),
    ]
}
