//! `agentrl logprobs --model PATH --ids 1,2,3`: loads a Llama-family model (a Hugging Face
//! checkpoint directory / `.safetensors` file, or a llama.cpp `.gguf` file) and prints, as JSON,
//! the log-probability of every token id given the ids before it.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use clap::Args;
use serde::Serialize;
use tch::{Device, Tensor};

use crate::PolicyModel;
use crate::llama::{Dtype, Llama};

/// Arguments of `agentrl logprobs`.
#[derive(Debug, Args)]
pub struct LogprobsArgs {
    /// Model: a checkpoint directory (config.json + weights), a .safetensors file or a .gguf file.
    #[arg(long)]
    pub model: PathBuf,
    /// Comma-separated token ids, e.g. `1,2,3`.
    #[arg(long)]
    pub ids: String,
    /// Weights' type: `f32` (exact) or `bf16`.
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
}

/// The JSON printed by `agentrl logprobs`: the ids and, for each, its log-probability given
/// its prefix (`null` for the first id, which has none).
#[derive(Debug, Serialize)]
pub struct LogprobsReport {
    /// The token ids, as given.
    pub ids: Vec<i64>,
    /// `log p(ids[i] | ids[..i])`; `None` for `i = 0`.
    pub logprobs: Vec<Option<f64>>,
}

/// Parses comma-separated token ids, naming the offending item.
pub fn parse_ids(text: &str) -> Result<Vec<i64>> {
    let ids = text
        .split(',')
        .enumerate()
        .map(|(i, item)| {
            let item = item.trim();
            item.parse::<u32>().map(i64::from).map_err(|_| {
                Error::Config(format!(
                    "--ids: item {} (`{item}`) is not a non-negative integer token id",
                    i + 1
                ))
            })
        })
        .collect::<Result<Vec<i64>>>()?;
    Ok(ids)
}

/// Loads the model at `path` on the CPU in `dtype`.
pub fn load_model(path: &Path, dtype: Dtype) -> Result<Llama> {
    let (_vs, model) = crate::load::load_llama(path, Device::Cpu, dtype)?;
    Ok(model)
}

/// Log-probabilities of `ids` under `model` (each given its prefix), after checking them
/// against the vocabulary and the context length.
pub fn logprobs(model: &Llama, ids: &[i64]) -> Result<LogprobsReport> {
    let config = model.config();
    if let Some(bad) = ids
        .iter()
        .find(|&&id| id as u64 >= config.vocab_size as u64)
    {
        return Err(Error::Config(format!(
            "--ids: token id {bad} is out of the vocabulary (size {})",
            config.vocab_size
        )));
    }
    if ids.len() > config.max_position_embeddings {
        return Err(Error::Config(format!(
            "--ids: {} ids exceed the model's context of {} positions",
            ids.len(),
            config.max_position_embeddings
        )));
    }
    let mut out = vec![None];
    if ids.len() > 1 {
        let input = Tensor::from_slice(ids).unsqueeze(0).to(model.device());
        let (lp, _entropy) = tch::no_grad(|| model.token_logprobs(&input, 1.0));
        let values = Vec::<f32>::try_from(lp.flatten(0, -1))
            .map_err(|e| Error::Policy(format!("reading log-probabilities: {e}")))?;
        out.extend(values.into_iter().map(|v| Some(f64::from(v))));
    }
    Ok(LogprobsReport {
        ids: ids.to_vec(),
        logprobs: out,
    })
}

/// Runs `agentrl logprobs`, writing the [`LogprobsReport`] as one JSON line to `out` (the
/// binary passes stdout).
pub fn run(args: &LogprobsArgs, out: &mut dyn Write) -> Result<()> {
    let ids = parse_ids(&args.ids)?;
    let model = load_model(&args.model, args.dtype)?;
    let report = logprobs(&model, &ids)?;
    let line = serde_json::to_string(&report).map_err(|e| Error::json("logprobs report", e))?;
    writeln!(out, "{line}").map_err(|e| Error::Policy(format!("writing the report: {e}")))
}
