//! `HfTokenizer::from_gguf` / `ChatTemplate::from_gguf`: a tiny GPT-2 style vocabulary written
//! here as GGUF metadata rebuilds into a byte-level BPE tokenizer whose control tokens are single
//! ids, and a ChatML template that renders through [`HfChatFormat`]. An opt-in test reads the
//! real SmolLM2 GGUF (`AGENTRL_SMOLLM2_GGUF`).

use std::path::Path;

use agentrl_core::Message;
use agentrl_policy::ChatFormat;
use agentrl_policy::gguf::GgufFile;
use agentrl_policy::hf::{ChatTemplate, HfChatFormat, HfTokenizer};

// ---------------------------------------------------------------- a minimal GGUF v3 writer

enum Meta {
    U32(u32),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_meta(b: &mut Vec<u8>, v: &Meta) {
    match v {
        Meta::U32(x) => {
            b.extend_from_slice(&4u32.to_le_bytes());
            b.extend_from_slice(&x.to_le_bytes());
        }
        Meta::Str(s) => {
            b.extend_from_slice(&8u32.to_le_bytes());
            put_str(b, s);
        }
        Meta::StrArray(v) => {
            b.extend_from_slice(&9u32.to_le_bytes());
            b.extend_from_slice(&8u32.to_le_bytes());
            b.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for s in v {
                put_str(b, s);
            }
        }
        Meta::I32Array(v) => {
            b.extend_from_slice(&9u32.to_le_bytes());
            b.extend_from_slice(&5u32.to_le_bytes());
            b.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for x in v {
                b.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
}

/// An F32 tensor: name, GGUF dims (innermost first), values in storage order.
struct F32Tensor {
    name: String,
    dims: Vec<u64>,
    data: Vec<f32>,
}

fn write_gguf(path: &Path, kvs: &[(String, Meta)], tensors: &[F32Tensor]) {
    const ALIGN: usize = 32;
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_str(&mut b, k);
        put_meta(&mut b, v);
    }
    let mut offset = 0usize;
    let mut offsets = Vec::new();
    for t in tensors {
        put_str(&mut b, &t.name);
        b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&0u32.to_le_bytes()); // GGML_TYPE_F32
        b.extend_from_slice(&(offset as u64).to_le_bytes());
        offsets.push(offset);
        offset = (offset + 4 * t.data.len()).div_ceil(ALIGN) * ALIGN;
    }
    let start = b.len().div_ceil(ALIGN) * ALIGN;
    b.resize(start, 0);
    for (t, off) in tensors.iter().zip(offsets) {
        b.resize(start + off, 0);
        for x in &t.data {
            b.extend_from_slice(&x.to_le_bytes());
        }
    }
    std::fs::write(path, b).unwrap();
}

// ---------------------------------------------------------------- a tiny gpt2 vocabulary

const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
    message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}\
    {{ '<|im_start|>assistant\\n' }}{% endif %}";

/// GPT-2's byte → printable character map.
fn byte_chars() -> Vec<char> {
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

const MERGES: [&str; 6] = ["h e", "Ġ t", "Ġt he", "l l", "ll o", "Ġ w"];

/// Tokens (3 control tokens, 256 bytes, one per merge), merges and token types.
fn tiny_vocab() -> (Vec<String>, Vec<String>, Vec<i32>) {
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
fn tokenizer_meta() -> Vec<(String, Meta)> {
    let (tokens, merges, types) = tiny_vocab();
    vec![
        ("tokenizer.ggml.model".into(), Meta::Str("gpt2".into())),
        ("tokenizer.ggml.tokens".into(), Meta::StrArray(tokens)),
        ("tokenizer.ggml.merges".into(), Meta::StrArray(merges)),
        ("tokenizer.ggml.token_type".into(), Meta::I32Array(types)),
        ("tokenizer.ggml.bos_token_id".into(), Meta::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Meta::U32(2)),
        ("tokenizer.chat_template".into(), Meta::Str(CHATML.into())),
    ]
}

fn tiny_file(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Meta)>)) -> GgufFile {
    let mut kvs = vec![(
        "general.architecture".to_string(),
        Meta::Str("llama".into()),
    )];
    kvs.extend(tokenizer_meta());
    edit(&mut kvs);
    let path = dir.join("tok.gguf");
    write_gguf(&path, &kvs, &[]);
    GgufFile::open(&path).unwrap()
}

fn tiny_tokenizer() -> HfTokenizer {
    let dir = tempfile::tempdir().unwrap();
    HfTokenizer::from_gguf(&tiny_file(dir.path(), |_| {})).unwrap()
}

#[test]
fn text_round_trips_through_the_rebuilt_bpe() {
    let tok = tiny_tokenizer();
    assert_eq!(tok.vocab_size(), 3 + 256 + MERGES.len());
    for text in [
        "hello the world",
        " the hello\n\tx=1+2;",
        "Ünïcödé and emoji 🦀",
        "",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text, "{ids:?}");
    }
}

#[test]
fn merges_apply_in_rank_order() {
    let tok = tiny_tokenizer();
    let the = tok.token_id("Ġthe").unwrap();
    let he = tok.token_id("he").unwrap();
    let llo = tok.token_id("llo").unwrap();
    assert_eq!(tok.encode(" the").unwrap(), vec![the]);
    assert_eq!(tok.encode("hello").unwrap(), vec![he, llo]);
    // No leading space is added: "the" alone is "t" + "he".
    let t = tok.token_id("t").unwrap();
    assert_eq!(tok.encode("the").unwrap(), vec![t, he]);
}

#[test]
fn control_tokens_encode_as_single_ids() {
    let tok = tiny_tokenizer();
    let ids = tok.encode("<|im_start|>user\nhello<|im_end|>\n").unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(ids.iter().filter(|&&i| i == 1).count(), 1);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1);
    assert_eq!(tok.token_id("<|im_end|>"), Some(2));
    assert_eq!(
        tok.decode(&ids).unwrap(),
        "<|im_start|>user\nhello<|im_end|>\n"
    );
}

#[test]
fn chat_template_from_gguf_drives_a_chat_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = tiny_file(dir.path(), |_| {});
    let template = ChatTemplate::from_gguf(&file).unwrap();
    assert_eq!(template.bos_token(), "<|im_start|>");
    assert_eq!(template.eos_token(), "<|im_end|>");
    let format = HfChatFormat::new(HfTokenizer::from_gguf(&file).unwrap(), template).unwrap();
    assert_eq!(format.stop_ids(), vec![2]);
    let ids = format
        .try_render_prompt(&[Message::user("hello")], &[])
        .unwrap();
    assert_eq!(
        format.decode(&ids),
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn non_gpt2_models_and_missing_keys_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let file = tiny_file(dir.path(), |kvs| {
        kvs[1].1 = Meta::Str("llama".into());
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("\"llama\"") && err.contains("gpt2"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        kvs.retain(|(k, _)| k != "tokenizer.ggml.merges");
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.merges"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        kvs.retain(|(k, _)| k != "tokenizer.chat_template");
    });
    let err = ChatTemplate::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.chat_template"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        if let Some(m) = kvs.iter_mut().find(|(k, _)| k == "tokenizer.ggml.merges") {
            m.1 = Meta::StrArray(vec!["nospace".into()]);
        }
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("nospace"), "{err}");
}

#[test]
#[ignore = "needs the SmolLM2 GGUF file: set AGENTRL_SMOLLM2_GGUF"]
fn smollm2_tokenizer_from_gguf() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let file = GgufFile::open(&path).unwrap();
    let tok = HfTokenizer::from_gguf(&file).unwrap();
    assert_eq!(tok.vocab_size(), 49_152);
    let text =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let ids = tok.encode(text).unwrap();
    assert_eq!(ids[0], 1, "{ids:?}");
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1, "{ids:?}");
    assert_eq!(tok.decode(&ids).unwrap(), text);
    // Digits are split one by one.
    assert_eq!(tok.encode("2024").unwrap().len(), 4);
    let format = HfChatFormat::new(tok, ChatTemplate::from_gguf(&file).unwrap()).unwrap();
    let rendered = format
        .try_render_prompt(&[Message::user("What is the capital of France?")], &[])
        .unwrap();
    assert_eq!(rendered[0], 1);
}
