//! `Llama::load_gguf`: tiny random Llama / Qwen2 models written here as GGUF (f32, with
//! llama.cpp's Q/K permutation for `llama`) load back with identical logits; missing tensors,
//! wrong shapes and bad metadata give errors naming the tensor or key and the file. An opt-in
//! test runs the real SmolLM2-135M-Instruct GGUF (`AGENTRL_SMOLLM2_GGUF`).
#![cfg(feature = "tch")]

use std::path::Path;

use agentrl_policy::gguf::{GgufFile, permute_llama_qk};
use agentrl_policy::llama::{Llama, LlamaConfig, gguf_config};
use tch::{Device, Kind, Tensor, nn};

// ---------------------------------------------------------------- a minimal GGUF v3 writer

enum Meta {
    U32(u32),
    F32(f32),
    Str(String),
    StrArray(Vec<String>),
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

// ---------------------------------------------------------------- tiny models

fn tiny_config(tied: bool, model_type: &str) -> LlamaConfig {
    let json = format!(
        r#"{{"model_type": "{model_type}", "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
        "max_position_embeddings": 64, "tie_word_embeddings": {tied}, "hidden_act": "silu"}}"#
    );
    LlamaConfig::from_json_str(&json, "tiny").unwrap()
}

/// A tiny model with every variable (norms and biases included) randomised.
fn tiny(seed: i64, tied: bool, model_type: &str) -> (nn::VarStore, Llama) {
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let m = Llama::new(&vs.root(), tiny_config(tied, model_type)).unwrap();
    tch::no_grad(|| {
        for (_, mut v) in vs.variables() {
            let noise = Tensor::randn_like(&v) * 0.2;
            let _ = v.g_add_(&noise);
        }
    });
    (vs, m)
}

/// The GGUF name of a Hugging Face variable name.
fn gguf_name(hf: &str) -> String {
    let fixed = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == hf) {
        return g.to_string();
    }
    let rest = hf.strip_prefix("model.layers.").unwrap();
    let (layer, rest) = rest.split_once('.').unwrap();
    let parts = [
        ("input_layernorm.", "attn_norm."),
        ("self_attn.q_proj.", "attn_q."),
        ("self_attn.k_proj.", "attn_k."),
        ("self_attn.v_proj.", "attn_v."),
        ("self_attn.o_proj.", "attn_output."),
        ("post_attention_layernorm.", "ffn_norm."),
        ("mlp.gate_proj.", "ffn_gate."),
        ("mlp.up_proj.", "ffn_up."),
        ("mlp.down_proj.", "ffn_down."),
    ];
    let (h, g) = parts.iter().find(|(h, _)| rest.starts_with(h)).unwrap();
    format!("blk.{layer}.{g}{}", &rest[h.len()..])
}

/// The model's variables as GGUF F32 tensors (Q/K permuted like llama.cpp for `llama`).
fn gguf_tensors(vs: &nn::VarStore, config: &LlamaConfig) -> Vec<F32Tensor> {
    let permute = config.model_type.as_deref() == Some("llama");
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars.into_iter()
        .map(|(hf, t)| {
            let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
            let mut data = Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
            let heads = if hf.contains("q_proj") {
                config.num_attention_heads
            } else {
                config.kv_heads()
            };
            if permute && (hf.contains("q_proj") || hf.contains("k_proj")) {
                let cols = shape.get(1).copied().unwrap_or(1);
                data = permute_llama_qk(&data, heads, shape[0], cols).unwrap();
            }
            F32Tensor {
                name: gguf_name(&hf),
                dims: shape.iter().rev().map(|&d| d as u64).collect(),
                data,
            }
        })
        .collect()
}

fn metadata(config: &LlamaConfig) -> Vec<(String, Meta)> {
    let arch = config.model_type.clone().unwrap();
    let k = |s: &str| format!("{arch}.{s}");
    let u = |v: usize| Meta::U32(v as u32);
    vec![
        ("general.architecture".into(), Meta::Str(arch.clone())),
        ("general.name".into(), Meta::Str("tiny".into())),
        (k("embedding_length"), u(config.hidden_size)),
        (k("feed_forward_length"), u(config.intermediate_size)),
        (k("block_count"), u(config.num_hidden_layers)),
        (k("attention.head_count"), u(config.num_attention_heads)),
        (k("attention.head_count_kv"), u(config.kv_heads())),
        (
            k("attention.layer_norm_rms_epsilon"),
            Meta::F32(config.rms_norm_eps as f32),
        ),
        (k("rope.freq_base"), Meta::F32(config.rope_theta as f32)),
        (k("context_length"), u(config.max_position_embeddings)),
        (
            "tokenizer.ggml.tokens".into(),
            Meta::StrArray((0..config.vocab_size).map(|i| format!("t{i}")).collect()),
        ),
    ]
}

fn ids() -> Tensor {
    Tensor::from_slice(&[1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11]).view([2, 7])
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn round_trip(tied: bool, model_type: &str) {
    let (vs, model) = tiny(7, tied, model_type);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_gguf(
        &path,
        &metadata(model.config()),
        &gguf_tensors(&vs, model.config()),
    );
    let (vs2, loaded, config) = Llama::load_gguf(&path, Device::Cpu).unwrap();
    assert_eq!(&config, loaded.config());
    assert_eq!(config.tie_word_embeddings, tied);
    assert_eq!(config.vocab_size, 64);
    assert_eq!(config.kv_heads(), 2);
    assert_eq!(vs2.variables().len(), vs.variables().len());
    for (name, v) in vs.variables() {
        let w = &vs2.variables()[&name];
        assert_eq!(w.kind(), Kind::Float, "{name}");
        assert!(
            max_diff(&v, w) == 0.0,
            "{name} differs after the round trip"
        );
    }
    let d = tch::no_grad(|| max_diff(&model.logits(&ids()), &loaded.logits(&ids())));
    assert!(d < 1e-5, "{model_type} tied={tied}: logits differ by {d}");
}

#[test]
fn llama_untied_round_trip_gives_identical_logits() {
    round_trip(false, "llama");
}

#[test]
fn llama_tied_round_trip_gives_identical_logits() {
    round_trip(true, "llama");
}

#[test]
fn qwen2_with_biases_round_trip_gives_identical_logits() {
    round_trip(true, "qwen2");
}

#[test]
fn skipping_the_unpermute_would_change_the_logits() {
    // The permutation matters: a file written without it loads into a different model.
    let (vs, model) = tiny(3, false, "llama");
    let mut config = model.config().clone();
    config.model_type = Some("qwen2".into()); // qwen2 → no permutation in the writer
    let mut tensors = gguf_tensors(&vs, &config);
    tensors.retain(|t| !t.name.ends_with(".bias"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unpermuted.gguf");
    write_gguf(&path, &metadata(model.config()), &tensors);
    let (_vs2, loaded, _) = Llama::load_gguf(&path, Device::Cpu).unwrap();
    let d = tch::no_grad(|| max_diff(&model.logits(&ids()), &loaded.logits(&ids())));
    assert!(
        d > 1e-3,
        "unpermuting an unpermuted file should change logits ({d})"
    );
}

/// Writes the tiny untied llama with `edit` applied to its tensors and metadata.
fn write_edited(
    dir: &Path,
    edit: impl FnOnce(&mut Vec<(String, Meta)>, &mut Vec<F32Tensor>),
) -> std::path::PathBuf {
    let (vs, model) = tiny(11, false, "llama");
    let mut kvs = metadata(model.config());
    let mut tensors = gguf_tensors(&vs, model.config());
    edit(&mut kvs, &mut tensors);
    let path = dir.join("edited.gguf");
    write_gguf(&path, &kvs, &tensors);
    path
}

fn load_err(path: &Path) -> String {
    Llama::load_gguf(path, Device::Cpu).unwrap_err().to_string()
}

#[test]
fn missing_tensor_is_named_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_edited(dir.path(), |_, t| {
        t.retain(|t| t.name != "blk.1.ffn_up.weight")
    });
    let err = load_err(&path);
    assert!(err.contains("blk.1.ffn_up.weight"), "{err}");
    assert!(err.contains("model.layers.1.mlp.up_proj.weight"), "{err}");
    assert!(err.contains("edited.gguf"), "{err}");
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn wrong_shape_is_named_with_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_edited(dir.path(), |_, ts| {
        let t = ts
            .iter_mut()
            .find(|t| t.name == "blk.0.attn_v.weight")
            .unwrap();
        // [16, 32] stored as dims [32, 16]: write it transposed-dims instead.
        t.dims = vec![16, 32];
    });
    let err = load_err(&path);
    assert!(err.contains("blk.0.attn_v.weight"), "{err}");
    assert!(
        err.contains("[32, 16]") && err.contains("[16, 32]"),
        "{err}"
    );
    assert!(err.contains("edited.gguf"), "{err}");
}

#[test]
fn wrong_architecture_and_missing_metadata_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_edited(dir.path(), |kvs, _| {
        kvs[0].1 = Meta::Str("gpt2".into());
    });
    let err = load_err(&path);
    assert!(
        err.contains("gpt2") && err.contains("general.architecture"),
        "{err}"
    );

    let path = write_edited(dir.path(), |kvs, _| {
        kvs.retain(|(k, _)| k != "llama.block_count");
    });
    let err = load_err(&path);
    assert!(
        err.contains("llama.block_count") && err.contains("edited.gguf"),
        "{err}"
    );
}

#[test]
fn config_reads_heads_and_vocab_from_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_edited(dir.path(), |_, _| {});
    let file = GgufFile::open(&path).unwrap();
    let config = gguf_config(&file).unwrap();
    assert_eq!(config.hidden_size, 32);
    assert_eq!(config.intermediate_size, 48);
    assert_eq!(config.num_hidden_layers, 2);
    assert_eq!(config.num_attention_heads, 4);
    assert_eq!(config.kv_heads(), 2);
    assert_eq!(config.vocab_size, 64);
    assert_eq!(config.max_position_embeddings, 64);
    assert!(!config.tie_word_embeddings);
    assert!((config.rms_norm_eps - 1e-5).abs() < 1e-9);
}

// ---------------------------------------------------------------- the real SmolLM2 file

/// GPT-2 byte-level form of ASCII text (space → `Ġ`, newline → `Ċ`).
fn byte_level(text: &str) -> String {
    text.replace(' ', "Ġ").replace('\n', "Ċ")
}

/// A GPT-2 style pre-tokenisation, enough for plain ASCII prose: an optional space plus a run
/// of letters, single digits, and every other character alone.
fn pre_tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        if chars[i] == ' ' && chars.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) {
            i += 1;
        }
        if chars[i].is_ascii_alphabetic() {
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
        } else {
            i += 1;
        }
        words.push(byte_level(&chars[start..i].iter().collect::<String>()));
    }
    words
}

/// Byte-level BPE with the GGUF merges (lowest rank first); `<|im_start|>` / `<|im_end|>` are
/// special tokens.
fn bpe_encode(vocab: &[String], merges: &[String], text: &str) -> Vec<i64> {
    let rank: std::collections::HashMap<(String, String), usize> = merges
        .iter()
        .enumerate()
        .filter_map(|(r, m)| {
            let (a, b) = m.split_once(' ')?;
            Some(((a.to_string(), b.to_string()), r))
        })
        .collect();
    let id_of = |piece: &str| vocab.iter().position(|t| t == piece).unwrap() as i64;
    let mut ids = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(special) = ["<|im_start|>", "<|im_end|>"]
            .into_iter()
            .find(|s| rest.starts_with(s))
        {
            ids.push(id_of(special));
            rest = &rest[special.len()..];
            continue;
        }
        let end = rest.find("<|").filter(|&e| e > 0).unwrap_or(rest.len());
        for word in pre_tokenize(&rest[..end]) {
            let mut parts: Vec<String> = word.chars().map(String::from).collect();
            loop {
                let best = (0..parts.len().saturating_sub(1))
                    .filter_map(|i| {
                        rank.get(&(parts[i].clone(), parts[i + 1].clone()))
                            .map(|&r| (r, i))
                    })
                    .min();
                let Some((_, i)) = best else { break };
                let merged = format!("{}{}", parts[i], parts[i + 1]);
                parts.splice(i..i + 2, [merged]);
            }
            ids.extend(parts.iter().map(|p| id_of(p)));
        }
        rest = &rest[end..];
    }
    ids
}

#[test]
#[ignore = "needs the SmolLM2-135M-Instruct GGUF in AGENTRL_SMOLLM2_GGUF"]
fn smollm2_gguf_answers_the_capital_of_france() {
    let Ok(path) = std::env::var("AGENTRL_SMOLLM2_GGUF") else {
        eprintln!("AGENTRL_SMOLLM2_GGUF is not set; skipping");
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let vocab = file
        .get_array_str("tokenizer.ggml.tokens")
        .unwrap()
        .to_vec();
    let merges = file
        .get_array_str("tokenizer.ggml.merges")
        .unwrap()
        .to_vec();
    let (_vs, model, config) = Llama::load_gguf(&path, Device::Cpu).unwrap();
    assert_eq!(config.hidden_size, 576);
    assert_eq!(config.num_hidden_layers, 30);
    assert_eq!(config.kv_heads(), 3);
    assert!(config.tie_word_embeddings);
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let mut ids = bpe_encode(&vocab, &merges, prompt);
    let pieces: Vec<&str> = ids.iter().map(|&i| vocab[i as usize].as_str()).collect();
    eprintln!("prompt ids {ids:?} = {pieces:?}");
    assert_eq!(ids[0], 1);
    let mut generated = Vec::new();
    for step in 0..12 {
        let input = Tensor::from_slice(&ids).unsqueeze(0);
        let logits = tch::no_grad(|| model.logits(&input))
            .select(1, -1)
            .squeeze();
        let finite = logits.isfinite().all().int64_value(&[]) == 1;
        assert!(finite, "non-finite logits at step {step}");
        let next = logits.argmax(-1, false).int64_value(&[]);
        generated.push(vocab[next as usize].clone());
        if next == 2 {
            break;
        }
        ids.push(next);
    }
    eprintln!("greedy continuation: {generated:?}");
    let text = generated.concat().replace('Ġ', " ").replace('Ċ', "\n");
    assert!(
        text.contains("Paris"),
        "continuation {text:?} does not mention Paris"
    );
}
