//! `agentrl chat --model PATH "PROMPT"`: renders one user message with the model's own chat
//! template, generates a reply greedily and prints it. The model is a llama.cpp `.gguf` file
//! (weights, tokenizer and template all come from it) or a Hugging Face directory
//! (`config.json`, safetensors weights, `tokenizer.json`, `tokenizer_config.json`).

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Message, Result, SamplingParams, SeededRng};
use agentrl_policy::ChatFormat;
use agentrl_policy::gguf::GgufFile;
use agentrl_policy::hf::{ChatTemplate, HfChatFormat, HfTokenizer};
use agentrl_policy::llama::Llama;
use clap::Args;
use tch::Device;

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
}

/// Whether `path` names a GGUF file (by extension).
fn is_gguf(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Loads the model and its chat format from a `.gguf` file or a Hugging Face directory.
pub fn load_chat_model(path: &Path) -> Result<(Llama, HfChatFormat)> {
    if !path.exists() {
        return Err(Error::Config(format!(
            "model {} does not exist",
            path.display()
        )));
    }
    let hf = |e: agentrl_policy::hf::HfError| Error::Policy(format!("{}: {e}", path.display()));
    if is_gguf(path) {
        let file = GgufFile::open(path).map_err(|e| Error::Policy(e.to_string()))?;
        let tokenizer = HfTokenizer::from_gguf(&file).map_err(hf)?;
        let template = ChatTemplate::from_gguf(&file).map_err(hf)?;
        let format = HfChatFormat::new(tokenizer, template).map_err(hf)?;
        drop(file);
        let (_vs, model, _config) = Llama::load_gguf(path, Device::Cpu)?;
        Ok((model, format))
    } else if path.is_dir() {
        for needed in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
            if !path.join(needed).exists() {
                return Err(Error::Config(format!(
                    "model directory {} has no {needed}",
                    path.display()
                )));
            }
        }
        let format = HfChatFormat::from_dir(path).map_err(hf)?;
        let (_vs, model) = Llama::load(path, Device::Cpu)?;
        Ok((model, format))
    } else {
        Err(Error::Config(format!(
            "model {} is neither a .gguf file nor a Hugging Face model directory",
            path.display()
        )))
    }
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
        .generate(&[ids], &[params], &mut rngs, 0)?
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

/// Runs `agentrl chat`, printing the reply on stdout.
pub fn run(args: &ChatArgs) -> Result<()> {
    let (model, format) = load_chat_model(&args.model)?;
    let text = reply(&model, &format, &args.prompt, args.max_new_tokens)?;
    println!("{text}");
    Ok(())
}
