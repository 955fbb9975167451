//! A tiny random Llama written as GGUF, with a GPT-2 style vocabulary and a ChatML template in
//! its metadata (shared by the `chat` and `serve` tests).

use std::path::Path;

// ---------------------------------------------------------------- a minimal GGUF v3 writer

enum Meta {
    U32(u32),
    F32(f32),
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
        Meta::F32(x) => {
            b.extend_from_slice(&6u32.to_le_bytes());
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

/// A ChatML chat template (no tools).
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
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

// ---------------------------------------------------------------- a tiny random model

const HIDDEN: usize = 32;
const FFN: usize = 48;
const KV_DIM: usize = 16;

/// Deterministic pseudo-random values in [-0.5, 0.5).
fn values(n: usize, seed: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

/// Writes a one-layer random Llama with the tiny vocabulary as `tiny-chat.gguf`; returns its path.
pub fn write_tiny_model(dir: &Path) -> std::path::PathBuf {
    write_tiny_model_named(dir, "tiny-chat.gguf", 17)
}

/// Writes a one-layer random Llama (weights drawn from `seed`) as `dir/name`; returns its path.
pub fn write_tiny_model_named(dir: &Path, name: &str, seed: u64) -> std::path::PathBuf {
    let vocab = tiny_vocab().0.len();
    let mut kvs = vec![
        (
            "general.architecture".to_string(),
            Meta::Str("llama".into()),
        ),
        ("llama.embedding_length".into(), Meta::U32(HIDDEN as u32)),
        ("llama.feed_forward_length".into(), Meta::U32(FFN as u32)),
        ("llama.block_count".into(), Meta::U32(1)),
        ("llama.attention.head_count".into(), Meta::U32(4)),
        ("llama.attention.head_count_kv".into(), Meta::U32(2)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Meta::F32(1e-5),
        ),
        ("llama.rope.freq_base".into(), Meta::F32(10_000.0)),
        ("llama.context_length".into(), Meta::U32(128)),
    ];
    kvs.extend(tokenizer_meta());
    let mut seed = seed;
    let shapes: [(&str, usize, usize); 12] = [
        ("token_embd.weight", vocab, HIDDEN),
        ("output.weight", vocab, HIDDEN),
        ("output_norm.weight", 1, HIDDEN),
        ("blk.0.attn_norm.weight", 1, HIDDEN),
        ("blk.0.ffn_norm.weight", 1, HIDDEN),
        ("blk.0.attn_q.weight", HIDDEN, HIDDEN),
        ("blk.0.attn_k.weight", KV_DIM, HIDDEN),
        ("blk.0.attn_v.weight", KV_DIM, HIDDEN),
        ("blk.0.attn_output.weight", HIDDEN, HIDDEN),
        ("blk.0.ffn_gate.weight", FFN, HIDDEN),
        ("blk.0.ffn_up.weight", FFN, HIDDEN),
        ("blk.0.ffn_down.weight", HIDDEN, FFN),
    ];
    let tensors: Vec<F32Tensor> = shapes
        .iter()
        .map(|&(name, rows, cols)| F32Tensor {
            name: name.to_string(),
            dims: if rows == 1 {
                vec![cols as u64]
            } else {
                vec![cols as u64, rows as u64]
            },
            data: if rows == 1 {
                vec![1.0; cols]
            } else {
                values(rows * cols, &mut seed)
            },
        })
        .collect();
    let path = dir.join(name);
    write_gguf(&path, &kvs, &tensors);
    path
}
