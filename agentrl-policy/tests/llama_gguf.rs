//! `Llama::save_gguf` / `Llama::load_gguf`: tiny random Llama / Qwen2 models saved as GGUF
//! (F32, with llama.cpp's Q/K permutation for `llama`; F16) load back with identical logits; missing tensors,
//! wrong shapes and bad metadata give errors naming the tensor or key and the file. An opt-in
//! test runs the real SmolLM2-135M-Instruct GGUF (`AGENTRL_SMOLLM2_GGUF`).
#![cfg(feature = "tch")]

use std::path::Path;

use agentrl_policy::gguf::{GgufFile, GgufTensorData, MetaValue, tensors_of, write_gguf};
use agentrl_policy::llama::{GgufPrecision, Llama, LlamaConfig, gguf_config};
use tch::{Device, Kind, Tensor, nn};

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

/// The model saved by `Llama::save_gguf` (F32), read back as metadata and tensors to edit.
fn saved_parts(
    vs: &nn::VarStore,
    model: &Llama,
) -> (Vec<(String, MetaValue)>, Vec<GgufTensorData>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saved.gguf");
    model.save_gguf(vs, &path, GgufPrecision::F32, &[]).unwrap();
    let file = GgufFile::open(&path).unwrap();
    (file.metadata().to_vec(), tensors_of(&file).unwrap())
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
    model
        .save_gguf(&vs, &path, GgufPrecision::F32, &[])
        .unwrap();
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
fn f16_export_is_half_the_size_and_close() {
    let (vs, model) = tiny(5, false, "llama");
    let dir = tempfile::tempdir().unwrap();
    let (f32_path, f16_path) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
    model
        .save_gguf(&vs, &f32_path, GgufPrecision::F32, &[])
        .unwrap();
    model
        .save_gguf(&vs, &f16_path, GgufPrecision::F16, &[])
        .unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64;
    assert!(size(&f16_path) < 0.6 * size(&f32_path));
    let file = GgufFile::open(&f16_path).unwrap();
    let kind = |n: &str| file.tensor_info(n).unwrap().ggml_type.to_string();
    assert_eq!(kind("blk.0.attn_q.weight"), "F16");
    assert_eq!(kind("blk.0.attn_norm.weight"), "F32", "norms stay f32");
    let (_vs, loaded, _) = Llama::load_gguf(&f16_path, Device::Cpu).unwrap();
    let d = tch::no_grad(|| max_diff(&model.logits(&ids()), &loaded.logits(&ids())));
    assert!(d > 0.0 && d < 2e-2, "f16 logits differ by {d}");
}

#[test]
fn extra_metadata_is_carried_and_config_keys_win() {
    let (vs, model) = tiny(6, true, "qwen2");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.gguf");
    let extra = [
        (
            "tokenizer.chat_template".to_string(),
            MetaValue::String("{{ x }}".into()),
        ),
        ("qwen2.block_count".to_string(), MetaValue::U32(99)),
    ];
    model
        .save_gguf(&vs, &path, GgufPrecision::F32, &extra)
        .unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.get_str("tokenizer.chat_template").unwrap(), "{{ x }}");
    assert_eq!(file.get_u32("qwen2.block_count").unwrap(), 2);
    assert_eq!(file.get_str("general.architecture").unwrap(), "qwen2");
    assert_eq!(agentrl_policy::llama::tokenizer_metadata(&file).len(), 1);
}

#[test]
fn writer_refuses_data_that_does_not_fit_its_dims() {
    let mut t = GgufTensorData::f32("w", &[2, 3], &[0.0; 6]);
    t.data.pop();
    let err = agentrl_policy::gguf::encode_gguf(&[], &[t.clone(), t.clone()]).unwrap_err();
    assert!(
        err.to_string().contains("'w'") && err.to_string().contains("needs 24 bytes"),
        "{err}"
    );
    let ok = GgufTensorData::f32("w", &[2, 3], &[0.0; 6]);
    let err = agentrl_policy::gguf::encode_gguf(&[], &[ok.clone(), ok]).unwrap_err();
    assert!(err.to_string().contains("written twice"), "{err}");
}

#[test]
fn skipping_the_unpermute_would_change_the_logits() {
    // The permutation matters: a file written without it loads into a different model.
    let (vs, model) = tiny(3, false, "llama");
    let (kvs, mut tensors) = saved_parts(&vs, &model);
    // Put the Hugging Face row order back into the Q/K tensors, as a converter that forgot the
    // permutation would.
    let vars = vs.variables();
    for t in tensors.iter_mut() {
        let hf = match t.name.as_str() {
            "blk.0.attn_q.weight" => "model.layers.0.self_attn.q_proj.weight",
            "blk.0.attn_k.weight" => "model.layers.0.self_attn.k_proj.weight",
            _ => continue,
        };
        let values = Vec::<f32>::try_from(vars[hf].flatten(0, -1)).unwrap();
        t.data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unpermuted.gguf");
    write_gguf(&path, &kvs, &tensors).unwrap();
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
    edit: impl FnOnce(&mut Vec<(String, MetaValue)>, &mut Vec<GgufTensorData>),
) -> std::path::PathBuf {
    let (vs, model) = tiny(11, false, "llama");
    let (mut kvs, mut tensors) = saved_parts(&vs, &model);
    edit(&mut kvs, &mut tensors);
    let path = dir.join("edited.gguf");
    write_gguf(&path, &kvs, &tensors).unwrap();
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
fn a_nan_or_infinite_weight_is_named_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_edited(dir.path(), |_, ts| {
        let t = ts
            .iter_mut()
            .find(|t| t.name == "blk.1.ffn_down.weight")
            .unwrap();
        // F32 elements 3 and 7 (4 bytes each) become NaN and +inf.
        t.data[12..16].copy_from_slice(&f32::NAN.to_le_bytes());
        t.data[28..32].copy_from_slice(&f32::INFINITY.to_le_bytes());
    });
    let err = load_err(&path);
    assert!(err.contains("blk.1.ffn_down.weight"), "{err}");
    assert!(err.contains("model.layers.1.mlp.down_proj.weight"), "{err}");
    assert!(err.contains("edited.gguf"), "{err}");
    assert!(
        err.contains("2 of") && err.contains("NaN or infinite"),
        "{err}"
    );
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
        kvs[0].1 = MetaValue::String("gpt2".into());
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

#[test]
fn lora_models_are_saved_merged() {
    let (vs, mut model) = tiny(8, false, "llama");
    model
        .attach_lora(&vs, &agentrl_policy::llama::LoraConfig::new(4, 8.0))
        .unwrap();
    tch::no_grad(|| {
        for (name, mut v) in vs.variables() {
            if name.contains("lora_B") {
                let _ = v.g_add_(&(Tensor::randn_like(&v) * 0.1));
            }
        }
    });
    let adapted = tch::no_grad(|| model.logits(&ids()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lora.gguf");
    let err = model
        .save_gguf(&vs, &path, GgufPrecision::F32, &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("merge them first"), "{err}");
    model.merge_lora();
    model
        .save_gguf(&vs, &path, GgufPrecision::F32, &[])
        .unwrap();
    let (_vs, loaded, _) = Llama::load_gguf(&path, Device::Cpu).unwrap();
    let d = tch::no_grad(|| max_diff(&adapted, &loaded.logits(&ids())));
    assert!(
        d < 1e-4,
        "the merged export differs from the adapted model by {d}"
    );
}
