//! The model behind `agentrl serve`: a [`TchPolicy`] (batching concurrent requests), the chat
//! format and tokenizer that turn text and messages into ids, and a loader of new weights.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrl_core::{Error, Message, Result, TokenId, ToolSpec};
use tch::{Device, Kind, nn};

use crate::hf::HfChatFormat;
use crate::llama::{
    ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, CheckpointPaths, Dtype, Llama, LlamaConfig,
    is_adapter_name, load_adapter_weights, load_weights, read_peft_config,
};
use crate::load::{
    is_agentrl_checkpoint, is_gguf, load_llama, load_llama_chat, load_tiny, tiny_weights_file,
};
use crate::{
    ByteTokenizer, ChatFormat, Detokenizer, GptConfig, NamedWeights, TchPolicy, TinyChatFormat,
    TinyGpt, snapshot_weights,
};

/// How a served model reads and writes text.
pub enum Codec {
    /// AgentRL's byte tokenizer and compact chat format (TinyGpt).
    Tiny(TinyChatFormat),
    /// A Hugging Face tokenizer and chat template (Llama family).
    Hf(Arc<HfChatFormat>),
}

impl Codec {
    /// The chat format.
    pub fn format(&self) -> &dyn ChatFormat {
        match self {
            Codec::Tiny(f) => f,
            Codec::Hf(f) => f.as_ref(),
        }
    }

    /// The prompt ids of a conversation offering `tools`, ending with the assistant header.
    pub fn render_chat(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> std::result::Result<Vec<TokenId>, String> {
        match self {
            Codec::Tiny(f) => Ok(f.render_prompt(messages, tools)),
            Codec::Hf(f) => f
                .try_render_prompt(messages, tools)
                .map_err(|e| e.to_string()),
        }
    }

    /// The ids of plain text.
    pub fn encode(&self, text: &str) -> std::result::Result<Vec<TokenId>, String> {
        match self {
            Codec::Tiny(_) => Ok(ByteTokenizer.encode(text)),
            Codec::Hf(f) => f.tokenizer().encode(text).map_err(|e| e.to_string()),
        }
    }

    /// Ids as text (special tokens written out).
    pub fn decode(&self, ids: &[TokenId]) -> String {
        self.format().decode(ids)
    }
}

/// Builds the weights to push from a checkpoint path (runs on a blocking thread).
pub type WeightLoader = Box<dyn Fn(&Path) -> Result<NamedWeights> + Send + Sync>;

/// A model being served.
pub struct ServedModel {
    /// The name `/v1/models` lists.
    pub name: String,
    /// The batching policy thread.
    pub policy: TchPolicy,
    /// Text and chat rendering.
    pub codec: Codec,
    /// Longest sequence (prompt + generation).
    pub context_len: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Reads new weights for `/v1/load_weights`.
    pub loader: WeightLoader,
}

impl ServedModel {
    /// Serves a `TinyGpt` (AgentRL's byte-level model) whose variables live in `vs`.
    pub fn tiny(
        name: &str,
        vs: nn::VarStore,
        model: TinyGpt,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self> {
        let config = model.config().clone();
        let device = vs.device();
        let format = TinyChatFormat::new();
        let detokenizer: Detokenizer = Arc::new(move |ids| format.decode(ids));
        let policy = TchPolicy::spawn_with_detokenizer(vs, model, max_batch, seed, detokenizer)?;
        Ok(ServedModel {
            name: name.to_string(),
            policy,
            codec: Codec::Tiny(format),
            context_len: config.max_seq_len,
            vocab_size: config.vocab_size,
            loader: Box::new(move |path| tiny_weights(&config, device, path)),
        })
    }

    /// Serves a Llama-family model with its chat format. `source` is the file or directory it
    /// was loaded from: PEFT adapters pushed to `/v1/load_weights` are merged into the weights
    /// read from there (the base the server started with), not into whatever was loaded since.
    pub fn llama(
        name: &str,
        vs: nn::VarStore,
        model: Llama,
        format: HfChatFormat,
        source: &Path,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self> {
        let source = source.to_path_buf();
        let config = model.config().clone();
        let device = vs.device();
        let format = Arc::new(format);
        let text = format.clone();
        let detokenizer: Detokenizer = Arc::new(move |ids| text.decode(ids));
        let policy = TchPolicy::spawn_with_detokenizer(vs, model, max_batch, seed, detokenizer)?;
        Ok(ServedModel {
            name: name.to_string(),
            policy,
            codec: Codec::Hf(format),
            context_len: config.max_position_embeddings,
            vocab_size: config.vocab_size,
            loader: Box::new(move |path| llama_weights(&config, device, &source, path)),
        })
    }

    /// Loads what `path` names: a `.gguf` file or Hugging Face directory (Llama family), or an
    /// AgentRL run directory / checkpoint file (TinyGpt; shape from `config` or the run's
    /// `config.toml`). The served name is `name`, else the path's file name.
    pub fn load(
        path: &Path,
        config: Option<&Path>,
        name: Option<String>,
        device: Device,
        dtype: Dtype,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self> {
        let name = name.unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "agentrl".into())
        });
        if config.is_some() || is_agentrl_checkpoint(path) {
            if dtype != Dtype::F32 {
                return Err(Error::Config(format!(
                    "--dtype {dtype}: AgentRL's tiny models are served in f32 only"
                )));
            }
            let (vs, model) = load_tiny(path, config, device)?;
            return Self::tiny(&name, vs, model, max_batch, seed);
        }
        if is_gguf(path) || path.join("config.json").is_file() {
            let (vs, model, format) = load_llama_chat(path, device, dtype)?;
            return Self::llama(&name, vs, model, format, path, max_batch, seed);
        }
        Err(Error::Config(format!(
            "--model {}: not a .gguf file, a Hugging Face directory (config.json, tokenizer.json, \
             tokenizer_config.json, weights) or an AgentRL run directory / checkpoint \
             (give --config RUN.toml for a bare .safetensors checkpoint)",
            path.display()
        )))
    }
}

/// Weights of a TinyGpt of shape `config` read from a checkpoint file or run directory.
fn tiny_weights(config: &GptConfig, device: Device, path: &Path) -> Result<NamedWeights> {
    let file: PathBuf = tiny_weights_file(path)?;
    let mut vs = nn::VarStore::new(device);
    let _model = TinyGpt::new(&vs.root(), config.clone())?;
    vs.load(&file).map_err(|e| {
        Error::Config(format!(
            "loading {} (it must hold weights of the served model's shape): {e}",
            file.display()
        ))
    })?;
    Ok(snapshot_weights(&vs))
}

/// Weights of a Llama of shape `config` read from a `.gguf` file, a Hugging Face directory,
/// a `.safetensors` file or a shard index — or, for a PEFT adapter directory, the weights of
/// `source` (the served base model) with the adapter merged in.
fn llama_weights(
    config: &LlamaConfig,
    device: Device,
    source: &Path,
    path: &Path,
) -> Result<NamedWeights> {
    if !path.exists() {
        return Err(Error::Config(format!("{} does not exist", path.display())));
    }
    if path.join(ADAPTER_CONFIG_FILE).is_file() {
        return base_with_adapter(source, device, path);
    }
    if is_gguf(path) {
        let (vs, _model, _config) = Llama::load_gguf(path, device)?;
        return Ok(snapshot_weights(&vs));
    }
    let weights = CheckpointPaths::resolve(path)?.weights;
    let mut vs = nn::VarStore::new(device);
    let _model = Llama::new_to_fill(&vs.root(), config.clone())?;
    vs.set_kind(Kind::Float);
    load_weights(&vs, &weights)?;
    Ok(snapshot_weights(&vs))
}

/// The weights of the base model at `source` with the PEFT adapter in `dir`
/// (`adapter_config.json` + `adapter_model.safetensors`) merged in: `W + (alpha / r) · B · A` on
/// every adapted projection, every other weight as in `source`.
fn base_with_adapter(source: &Path, device: Device, dir: &Path) -> Result<NamedWeights> {
    let lora = read_peft_config(dir)?;
    let (vs, mut model) = load_llama(source, device, Dtype::F32)?;
    model.attach_lora(&vs, &lora)?;
    load_adapter_weights(&vs, dir.join(ADAPTER_WEIGHTS_FILE))?;
    model.merge_lora();
    Ok(snapshot_weights(&vs)
        .into_iter()
        .filter(|(name, _)| !is_adapter_name(name))
        .collect())
}
