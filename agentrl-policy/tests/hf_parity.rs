//! Exactness against Hugging Face transformers: in fp32, the logits of the same checkpoint agree
//! within 1e-4 (max absolute difference) — for tiny random Llama, Qwen2 (q/k/v biases, tied
//! embeddings) and Llama 3.1 rope-scaled checkpoints written here, for the same kinds plus YaRN
//! and Qwen3 (q/k norms) re-saved by the installed transformers (`rope_parameters` in its
//! `config.json`), and for the real SmolLM2 GGUF.
//! In bf16 no two implementations agree to the bit; the bound is that our bf16 logits are about
//! as close to the exact (fp32) logits as transformers' own bf16 logits are.
//!
//! Needs a Python with torch and transformers (and `gguf` for the GGUF test), so the tests are
//! ignored by default: `cargo xtask parity` makes that Python and runs them; or set
//! `AGENTRL_PARITY_PYTHON` (and `AGENTRL_SMOLLM2_GGUF`) and run with `--ignored`. A PEFT-saved adapter
//! is checked the same way (`parity/peft_adapter.py`, which needs `peft` too).
#![cfg(feature = "tch")]

use std::path::Path;
use std::process::Command;

use agentrl_policy::llama::{Dtype, Llama};
use tch::{Device, Tensor, nn};

mod common;
use common::{random_llama, save_single};

/// The issue's bound on the max absolute logit difference.
const TOLERANCE: f64 = 1e-4;

fn python() -> String {
    std::env::var("AGENTRL_PARITY_PYTHON")
        .expect("set AGENTRL_PARITY_PYTHON to a python with torch and transformers")
}

/// transformers' logits `[T, V]` for `ids` with the model in `dtype`, from `hf_logits.py`.
fn hf_logits(model_dir: &Path, ids: &[i64], gguf_file: Option<&str>, dtype: Dtype) -> Tensor {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/hf_logits.py");
    let ids_arg: Vec<String> = ids.iter().map(i64::to_string).collect();
    let mut cmd = Command::new(python());
    cmd.arg(script).arg(model_dir).arg(ids_arg.join(","));
    if let Some(file) = gguf_file {
        cmd.arg(file);
    }
    cmd.args(["--dtype", dtype.name()]);
    let out = cmd.output().expect("running hf_logits.py");
    assert!(
        out.status.success(),
        "hf_logits.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shape: Vec<i64> = serde_json::from_value(json["shape"].clone()).unwrap();
    let values: Vec<f32> = serde_json::from_value(json["logits"].clone()).unwrap();
    Tensor::from_slice(&values).view(shape.as_slice())
}

/// Our logits `[T, V]` for `ids`.
fn our_logits(model: &Llama, ids: &[i64]) -> Tensor {
    tch::no_grad(|| {
        model
            .logits(&Tensor::from_slice(ids).view([1, ids.len() as i64]))
            .squeeze_dim(0)
    })
}

/// Writes a tiny checkpoint of `config_json` with every variable randomised, reloads it through
/// `Llama::load` and compares with transformers.
fn tiny_parity(seed: i64, config_json: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (vs, _model) = random_llama(seed, config_json);
    save_single(&vs, config_json, dir.path());
    let (_vs, loaded) = Llama::load(dir.path(), Device::Cpu).unwrap();
    let ids = [1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11, 30, 31];
    let theirs = hf_logits(dir.path(), &ids, None, Dtype::F32);
    let ours = our_logits(&loaded, &ids);
    assert_eq!(ours.size(), theirs.size());
    (ours - theirs).abs().max().double_value(&[])
}

/// Max |difference| from the exact (transformers fp32) logits of our bf16 logits and of
/// transformers' bf16 logits, for `model` loaded from `dir` (`gguf_file` in it, if given);
/// prints both and the max |difference| between the two bf16 results.
fn bf16_errors(
    what: &str,
    (vs, model): (&nn::VarStore, &mut Llama),
    dir: &Path,
    gguf_file: Option<&str>,
    ids: &[i64],
) -> (f64, f64) {
    let exact = hf_logits(dir, ids, gguf_file, Dtype::F32);
    let theirs = hf_logits(dir, ids, gguf_file, Dtype::Bf16);
    model.set_dtype(vs, Dtype::Bf16);
    let ours = our_logits(model, ids);
    let diff = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
    let (our_err, their_err) = (diff(&ours, &exact), diff(&theirs, &exact));
    eprintln!(
        "{what} bf16: max |logit - exact| ours {our_err:e}, transformers {their_err:e}; \
         max |ours - transformers| {:e}",
        diff(&ours, &theirs)
    );
    (our_err, their_err)
}

/// Our bf16 error may be at most this many times transformers' own bf16 error.
const BF16_ERROR_RATIO: f64 = 2.0;

fn tiny_json(model_type: &str, tied: bool, extra: &str) -> String {
    format!(
        r#"{{"model_type": "{model_type}", "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
        "max_position_embeddings": 64, "tie_word_embeddings": {tied}, "hidden_act": "silu"{extra}}}"#
    )
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn tiny_llama_logits_equal_transformers() {
    let diff = tiny_parity(1, &tiny_json("llama", false, ""));
    eprintln!("llama: max |logit diff| = {diff:e}");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn tiny_qwen2_logits_equal_transformers() {
    let diff = tiny_parity(2, &tiny_json("qwen2", true, ""));
    eprintln!("qwen2: max |logit diff| = {diff:e}");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn tiny_llama31_rope_scaling_logits_equal_transformers() {
    let scaling = r#", "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}"#;
    let diff = tiny_parity(3, &tiny_json("llama", false, scaling));
    eprintln!("llama 3.1 rope scaling: max |logit diff| = {diff:e}");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers + gguf and AGENTRL_SMOLLM2_GGUF: cargo xtask parity"]
fn smollm2_gguf_logits_equal_transformers() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let path = Path::new(&path);
    let (_vs, model, _config) = Llama::load_gguf(path, Device::Cpu).unwrap();
    // "<|im_start|>user\nWhat is 6*7?<|im_end|>" and a few more ordinary ids.
    let ids = [
        1i64, 4093, 198, 1780, 314, 216, 40, 42, 39, 47, 2, 198, 1, 520, 9531, 198,
    ];
    let dir = path.parent().unwrap();
    let file = path.file_name().unwrap().to_str().unwrap();
    let theirs = hf_logits(dir, &ids, Some(file), Dtype::F32);
    let ours = our_logits(&model, &ids);
    let diff = (ours - &theirs).abs().max().double_value(&[]);
    let scale = theirs.abs().max().double_value(&[]);
    eprintln!("SmolLM2 GGUF: max |logit diff| = {diff:e} (largest |logit| {scale:.2})");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn tiny_llama_bf16_is_as_close_to_exact_as_transformers_bf16() {
    let dir = tempfile::tempdir().unwrap();
    let json = tiny_json("qwen2", false, "");
    let (vs, _model) = random_llama(4, &json);
    save_single(&vs, &json, dir.path());
    let (vs, mut model) = Llama::load(dir.path(), Device::Cpu).unwrap();
    let ids = [1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11, 30, 31];
    let (ours, theirs) = bf16_errors("tiny qwen2", (&vs, &mut model), dir.path(), None, &ids);
    assert!(
        ours <= BF16_ERROR_RATIO * theirs + 1e-3,
        "{ours} vs {theirs}"
    );
}

#[test]
#[ignore = "needs torch + transformers + gguf and AGENTRL_SMOLLM2_GGUF: cargo xtask parity"]
fn smollm2_gguf_bf16_is_as_close_to_exact_as_transformers_bf16() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let path = Path::new(&path);
    let (vs, mut model, _config) = Llama::load_gguf(path, Device::Cpu).unwrap();
    let ids = [
        1i64, 4093, 198, 1780, 314, 216, 40, 42, 39, 47, 2, 198, 1, 520, 9531, 198,
    ];
    let dir = path.parent().unwrap();
    let file = path.file_name().unwrap().to_str().unwrap();
    let (ours, theirs) = bf16_errors("SmolLM2 GGUF", (&vs, &mut model), dir, Some(file), &ids);
    assert!(
        ours <= BF16_ERROR_RATIO * theirs + 1e-3,
        "{ours} vs {theirs}"
    );
}

/// Has the installed transformers re-save the checkpoint in `dir` (weights in `dtype`) into a
/// new directory, whose `config.json` is written the way that version writes it.
fn resaved_by_transformers(dir: &Path, dtype: Dtype) -> tempfile::TempDir {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/hf_resave.py");
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(python())
        .arg(script)
        .arg(dir)
        .arg(out.path())
        .args(["--dtype", dtype.name()])
        .output()
        .expect("running hf_resave.py");
    assert!(
        status.status.success(),
        "hf_resave.py failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    out
}

/// A tiny config with RoPE base `theta` (top-level: transformers re-saves it its own way).
fn tiny_json_theta(model_type: &str, theta: f64, extra: &str) -> String {
    tiny_json(model_type, false, extra).replace(
        "\"rope_theta\": 10000.0",
        &format!("\"rope_theta\": {theta:?}"),
    )
}

/// Writes a random checkpoint of `config_json`, has transformers re-save it (fp32) and compares
/// our logits on the re-saved directory with transformers' on it; returns the max difference.
fn resaved_parity(seed: i64, config_json: &str, what: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (vs, _model) = random_llama(seed, config_json);
    save_single(&vs, config_json, dir.path());
    let resaved = resaved_by_transformers(dir.path(), Dtype::F32);
    let written = std::fs::read_to_string(resaved.path().join("config.json")).unwrap();
    eprintln!("{what}: config.json as transformers writes it: {written}");
    let (_vs, loaded) = Llama::load(resaved.path(), Device::Cpu).unwrap();
    let ids = [1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11, 30, 31];
    let theirs = hf_logits(resaved.path(), &ids, None, Dtype::F32);
    let diff = (our_logits(&loaded, &ids) - theirs)
        .abs()
        .max()
        .double_value(&[]);
    eprintln!("{what}: max |logit diff| = {diff:e}");
    diff
}

/// Qwen3 extras: explicit head_dim wider than hidden/heads, no biases, q/k norms.
const QWEN3_EXTRA: &str = r#", "head_dim": 16, "attention_bias": false"#;

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_llama_rope_parameters_logits_equal_transformers() {
    let diff = resaved_parity(
        11,
        &tiny_json_theta("llama", 100_000.0, ""),
        "llama theta 1e5",
    );
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_llama31_scaling_logits_equal_transformers() {
    let scaling = r#", "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}"#;
    let diff = resaved_parity(
        12,
        &tiny_json_theta("llama", 500_000.0, scaling),
        "llama 3.1",
    );
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_llama_yarn_logits_equal_transformers() {
    let scaling = r#", "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 16}"#;
    let diff = resaved_parity(
        15,
        &tiny_json_theta("llama", 10_000.0, scaling),
        "llama yarn",
    );
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_qwen2_rope_base_1e6_logits_equal_transformers() {
    let diff = resaved_parity(13, &tiny_json_theta("qwen2", 1e6, ""), "qwen2 theta 1e6");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_qwen3_qk_norm_logits_equal_transformers() {
    let diff = resaved_parity(14, &tiny_json_theta("qwen3", 1e6, QWEN3_EXTRA), "qwen3");
    assert!(diff < TOLERANCE, "{diff}");
}

#[test]
#[ignore = "needs torch + transformers: cargo xtask parity"]
fn resaved_bf16_qwen3_is_as_close_to_exact_as_transformers_bf16() {
    let json = tiny_json_theta("qwen3", 1e6, QWEN3_EXTRA);
    let dir = tempfile::tempdir().unwrap();
    let (vs, _model) = random_llama(16, &json);
    save_single(&vs, &json, dir.path());
    let resaved = resaved_by_transformers(dir.path(), Dtype::Bf16);
    let (vs, mut model) = Llama::load(resaved.path(), Device::Cpu).unwrap();
    let ids = [1i64, 5, 9, 12, 40, 63, 2, 7, 3, 3, 8, 20, 0, 11, 30, 31];
    let (ours, theirs) = bf16_errors(
        "qwen3 bf16 on disk",
        (&vs, &mut model),
        resaved.path(),
        None,
        &ids,
    );
    assert!(
        ours <= BF16_ERROR_RATIO * theirs + 1e-3,
        "{ours} vs {theirs}"
    );
}

/// An adapter that PEFT itself saved (LoRA on every linear layer via `all-linear`, which PEFT
/// saves as full module paths, with rsLoRA and random `B`, on a tiny random Llama saved by
/// transformers; `parity/peft_adapter.py`) loads through `Llama::load_peft` and gives PEFT's
/// logits.
#[test]
#[ignore = "needs torch + transformers + peft: cargo xtask parity"]
fn an_adapter_saved_by_peft_gives_peft_logits() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/peft_adapter.py");
    let out = Command::new(python())
        .arg(script)
        .arg(dir.path())
        .output()
        .expect("running peft_adapter.py");
    assert!(
        out.status.success(),
        "peft_adapter.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (vs, mut model) = Llama::load(dir.path().join("base"), Device::Cpu).unwrap();
    let cfg = model.load_peft(&vs, dir.path().join("adapter")).unwrap();
    assert_eq!(cfg.targets, agentrl_policy::llama::TARGET_MODULES);
    assert!(
        (cfg.scale() - 8.0 / 2.0).abs() < 1e-12,
        "rsLoRA: alpha 8 / sqrt(r = 4)"
    );
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("logits.json")).unwrap())
            .unwrap();
    let ids: Vec<i64> = serde_json::from_value(want["ids"].clone()).unwrap();
    let rows: Vec<Vec<f32>> = serde_json::from_value(want["logits"].clone()).unwrap();
    let flat: Vec<f32> = rows.concat();
    let theirs = Tensor::from_slice(&flat).view([ids.len() as i64, -1]);
    let diff = (our_logits(&model, &ids) - theirs)
        .abs()
        .max()
        .double_value(&[]);
    println!("PEFT adapter (all-linear, rsLoRA): max |logit difference| {diff:.2e}");
    assert!(diff < TOLERANCE, "max logit difference {diff}");
}
