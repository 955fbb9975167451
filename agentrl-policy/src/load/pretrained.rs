//! Loading a pretrained Llama-family model for chatting or training: its weights and its chat
//! format (tokenizer and template) from a llama.cpp `.gguf` file or a Hugging Face directory
//! (`config.json`, safetensors weights, `tokenizer.json`, `tokenizer_config.json`).

use std::path::Path;

use agentrl_core::{Error, Result};
use tch::{Device, nn};

#[cfg(feature = "hf")]
use crate::gguf::GgufFile;
#[cfg(feature = "hf")]
use crate::hf::{ChatTemplate, GenerationDefaults, HfChatFormat, HfError, HfTokenizer};
use crate::llama::{Dtype, Llama};

/// Whether `path` names a GGUF file (by extension).
pub fn is_gguf(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Checks that `path` is a `.gguf` file or a Hugging Face model directory with the files a
/// chat model needs.
#[cfg(feature = "hf")]
fn check_model_path(path: &Path) -> Result<()> {
    if !path.exists() {
        return Err(Error::Config(format!(
            "model {} does not exist",
            path.display()
        )));
    }
    if is_gguf(path) {
        return Ok(());
    }
    if !path.is_dir() {
        return Err(Error::Config(format!(
            "model {} is neither a .gguf file nor a Hugging Face model directory",
            path.display()
        )));
    }
    for needed in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        if !path.join(needed).exists() {
            return Err(Error::Config(format!(
                "model directory {} has no {needed}",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Loads the chat format (tokenizer and template) of a `.gguf` file or a Hugging Face
/// directory; `template`, when given, is Jinja source used instead of the model's own template
/// (keeping the model's BOS/EOS tokens), so a model without a template of its own loads. A
/// directory's template is `chat_template.jinja`, else `chat_template.json`, else the field of
/// `tokenizer_config.json` (see [`ChatTemplate::from_model_dir`]); the `eos_token_id`s of its
/// `generation_config.json` join the stop ids.
#[cfg(feature = "hf")]
pub fn load_chat_format(path: &Path, template: Option<&str>) -> Result<HfChatFormat> {
    check_model_path(path)?;
    let hf = |e: HfError| Error::Policy(format!("{}: {e}", path.display()));
    let overridden = |e: HfError| match template {
        Some(_) => Error::Config(format!("the chat template override: {e}")),
        None => hf(e),
    };
    let (tokenizer, template) = if is_gguf(path) {
        let file = GgufFile::open(path).map_err(|e| Error::Policy(e.to_string()))?;
        (
            HfTokenizer::from_gguf(&file).map_err(hf)?,
            ChatTemplate::from_gguf_with_override(&file, template).map_err(overridden)?,
        )
    } else {
        (
            HfTokenizer::from_file(path.join("tokenizer.json")).map_err(hf)?,
            ChatTemplate::from_model_dir(path, template).map_err(overridden)?,
        )
    };
    let format = HfChatFormat::new(tokenizer, template).map_err(hf)?;
    if is_gguf(path) {
        return Ok(format);
    }
    match GenerationDefaults::from_model_dir(path).map_err(hf)? {
        Some(generation) => format.with_generation_defaults(generation).map_err(hf),
        None => Ok(format),
    }
}

/// Loads the weights of a `.gguf` file or a Hugging Face checkpoint (directory, `.safetensors`
/// file or shard index; no tokenizer needed) onto `device` in `dtype` (read as f32, then
/// converted); every variable is trainable.
pub fn load_llama(path: &Path, device: Device, dtype: Dtype) -> Result<(nn::VarStore, Llama)> {
    if !path.exists() {
        return Err(Error::Config(format!(
            "model {} does not exist",
            path.display()
        )));
    }
    let (vs, mut model) = if is_gguf(path) {
        let (vs, model, _config) = Llama::load_gguf(path, device)?;
        (vs, model)
    } else {
        Llama::load(path, device)?
    };
    if dtype == Dtype::Bf16 && !crate::device::native_bf16(device) {
        tracing::warn!(
            "dtype = \"bf16\" on a CPU without bf16 arithmetic (no AVX512-BF16): libtorch \
             converts every operand to f32 and back, so {} will compute several times slower \
             than in f32 (see the README's bf16 section); use dtype = \"f32\" on this machine",
            model_name(path)
        );
    }
    model.set_dtype(&vs, dtype);
    Ok((vs, model))
}

/// Loads a Llama-family model and its chat format from a `.gguf` file (weights, tokenizer and
/// template all come from it) or a Hugging Face directory (`config.json`, safetensors weights,
/// `tokenizer.json`, `tokenizer_config.json`).
#[cfg(feature = "hf")]
pub fn load_llama_chat(
    path: &Path,
    device: Device,
    dtype: Dtype,
) -> Result<(nn::VarStore, Llama, HfChatFormat)> {
    let format = load_chat_format(path, None)?;
    let (vs, model) = load_llama(path, device, dtype)?;
    Ok((vs, model, format))
}

/// A short name for the model at `path` (its file or directory name), recorded as
/// `base_model_name_or_path` in saved adapters without leaking the machine's directories.
pub fn model_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
