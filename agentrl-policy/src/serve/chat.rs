//! `agentrl chat --model PATH "PROMPT"`: renders one user message with the model's own chat
//! template, generates a reply greedily and prints it. The model is a llama.cpp `.gguf` file
//! (weights, tokenizer and template all come from it) or a Hugging Face directory
//! (`config.json`, safetensors weights, `tokenizer.json`, `tokenizer_config.json`). A directory's
//! `generation_config.json` sampling defaults are printed on stderr, one line, at start.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Message, Result, SamplingParams, SeededRng};
use clap::Args;
use tch::Device;

use crate::hf::HfChatFormat;
use crate::llama::{Dtype, Llama};
use crate::load::{load_chat_format, load_llama};
use crate::{ChatFormat, PolicyModel};

/// Arguments of `agentrl chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Model: a .gguf file or a Hugging Face directory (config.json, weights, tokenizer.json,
    /// tokenizer_config.json).
    #[arg(long)]
    pub model: PathBuf,
    /// The user message.
    pub prompt: String,
    /// Maximum number of tokens to generate.
    #[arg(long, default_value_t = 128)]
    pub max_new_tokens: usize,
    /// Weights' type: `f32` or `bf16`.
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
}

/// Loads the model (on the CPU, in `dtype`) and its chat format from a `.gguf` file or a
/// Hugging Face directory.
pub fn load_chat_model(path: &Path, dtype: Dtype) -> Result<(Llama, HfChatFormat)> {
    let format = load_chat_format(path, None)?;
    let (_vs, model) = load_llama(path, Device::Cpu, dtype)?;
    Ok((model, format))
}

/// Greedily generates the reply to one user message and returns its text (without the
/// end-of-turn token).
pub fn reply(
    model: &Llama,
    format: &HfChatFormat,
    prompt: &str,
    max_new_tokens: usize,
) -> Result<String> {
    let ids = format
        .try_render_prompt(&[Message::user(prompt)], &[])
        .map_err(|e| Error::Policy(format!("rendering the prompt: {e}")))?;
    let mut params = SamplingParams::greedy(max_new_tokens);
    params.stop_ids = format.stop_ids();
    let mut rngs = [SeededRng::new(0)];
    let generation = model
        .generate(&[ids], &[params], &mut rngs, 0, None)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Policy("generation returned no result".into()))?;
    let stops = format.stop_ids();
    let body = match generation.ids.split_last() {
        Some((last, rest)) if stops.contains(last) => rest,
        _ => &generation.ids[..],
    };
    format
        .tokenizer()
        .decode(body)
        .map_err(|e| Error::Policy(format!("decoding the reply: {e}")))
}

/// Runs `agentrl chat`, writing the reply and a newline to `out` (the binary passes stdout).
pub fn run(args: &ChatArgs, out: &mut dyn Write) -> Result<()> {
    let (model, format) = load_chat_model(&args.model, args.dtype)?;
    if let Some(generation) = format.generation_defaults() {
        eprintln!("generation_config.json defaults: {}", generation.summary());
    }
    let text = reply(&model, &format, &args.prompt, args.max_new_tokens)?;
    writeln!(out, "{text}").map_err(|e| Error::Policy(format!("writing the reply: {e}")))
}
