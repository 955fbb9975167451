//! A small GPT-style decoder in tch: rotary position embeddings (RoPE), pre-LayerNorm blocks,
//! causal attention, a KV cache for batched generation, and log-probabilities of given ids for
//! training.

use agentrl_core::{Error, FinishReason, Generation, Result, SamplingParams, SeededRng, TokenId};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn, nn::Module};

use crate::sampling::sample_token;

/// Shape of a [`TinyGpt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// Attention heads per block (must divide `d_model`).
    pub n_heads: usize,
    /// Longest sequence the position table covers.
    pub max_seq_len: usize,
    /// Hidden width of the MLP as a multiple of `d_model`.
    pub ffn_mult: usize,
    /// Base of the rotary position embedding frequencies.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
}

fn default_rope_theta() -> f64 {
    10_000.0
}

impl GptConfig {
    /// Checks that the shape is usable.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::Config(format!("model config: {m}")));
        if self.vocab_size == 0 || self.d_model == 0 || self.n_layers == 0 || self.n_heads == 0 {
            return bad("vocab_size, d_model, n_layers and n_heads must be positive");
        }
        if !self.d_model.is_multiple_of(self.n_heads)
            || !(self.d_model / self.n_heads).is_multiple_of(2)
        {
            return bad("n_heads must divide d_model into an even head size");
        }
        if !(self.rope_theta > 1.0 && self.rope_theta.is_finite()) {
            return bad("rope_theta must be a finite number above 1");
        }
        if self.max_seq_len < 2 || self.ffn_mult == 0 {
            return bad("max_seq_len must be >= 2 and ffn_mult >= 1");
        }
        Ok(())
    }
}

/// Cosine and sine tables of RoPE for every position, `[max_seq_len, head_dim / 2]`.
fn rope_tables(config: &GptConfig, device: Device) -> (Tensor, Tensor) {
    let half = (config.d_model / config.n_heads / 2) as i64;
    let inv_freq = (Tensor::arange(half, (Kind::Float, device))
        * (-2.0 / (2 * half) as f64)
        * config.rope_theta.ln())
    .exp();
    let pos = Tensor::arange(config.max_seq_len as i64, (Kind::Float, device));
    let angles = pos.unsqueeze(1) * inv_freq.unsqueeze(0);
    (angles.cos(), angles.sin())
}

/// Applies the rotation to `x` `[B, H, T, hd]` (first and second halves paired).
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let half = x.size().last().copied().unwrap_or(2) / 2;
    let x1 = x.narrow(-1, 0, half);
    let x2 = x.narrow(-1, half, half);
    Tensor::cat(&[&x1 * cos - &x2 * sin, &x1 * sin + &x2 * cos], -1)
}

/// Attention bias value for masked positions (finite, so fully masked rows stay finite).
const MASKED: f64 = -1e9;

#[derive(Debug)]
struct Block {
    ln1: nn::LayerNorm,
    qkv: nn::Linear,
    proj: nn::Linear,
    ln2: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

/// Per-layer cached keys and values, `[batch, heads, time, head_dim]`.
#[derive(Debug, Default)]
struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
}

/// The decoder.
#[derive(Debug)]
pub struct TinyGpt {
    config: GptConfig,
    tok_emb: nn::Embedding,
    /// RoPE tables `[max_seq_len, head_dim / 2]`.
    rope_cos: Tensor,
    rope_sin: Tensor,
    blocks: Vec<Block>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
    device: Device,
}

impl TinyGpt {
    /// Creates the variables under `vs` (names like `blocks.0.qkv.weight`).
    pub fn new(vs: &nn::Path, config: GptConfig) -> Result<Self> {
        config.validate()?;
        let d = config.d_model as i64;
        let emb_cfg = nn::EmbeddingConfig {
            ws_init: nn::Init::Randn {
                mean: 0.0,
                stdev: 0.02,
            },
            ..Default::default()
        };
        let tok_emb = nn::embedding(vs / "tok_emb", config.vocab_size as i64, d, emb_cfg);
        let (rope_cos, rope_sin) = rope_tables(&config, vs.device());
        let ffn = d * config.ffn_mult as i64;
        let blocks = (0..config.n_layers)
            .map(|i| {
                let p = vs / "blocks" / i;
                Block {
                    ln1: nn::layer_norm(&p / "ln1", vec![d], Default::default()),
                    qkv: nn::linear(&p / "qkv", d, 3 * d, Default::default()),
                    proj: nn::linear(&p / "proj", d, d, Default::default()),
                    ln2: nn::layer_norm(&p / "ln2", vec![d], Default::default()),
                    fc1: nn::linear(&p / "fc1", d, ffn, Default::default()),
                    fc2: nn::linear(&p / "fc2", ffn, d, Default::default()),
                }
            })
            .collect();
        Ok(TinyGpt {
            ln_f: nn::layer_norm(vs / "ln_f", vec![d], Default::default()),
            head: nn::linear(vs / "head", d, config.vocab_size as i64, Default::default()),
            tok_emb,
            rope_cos,
            rope_sin,
            blocks,
            device: vs.device(),
            config,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// Logits `[B, T, V]` for ids `[B, T]` at `positions` `[B, T]`; `bias` is added to the attention
    /// scores (`[B, 1, T, T_keys]`) or `None` for a plain causal mask without a cache.
    fn forward(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        mut cache: Option<&mut KvCache>,
    ) -> Tensor {
        let (b, t) = ids.size2().unwrap_or((1, 1));
        let h = self.config.n_heads as i64;
        let d = self.config.d_model as i64;
        let hd = d / h;
        let mut x = self.tok_emb.forward(ids);
        // [B, 1, T, hd/2], broadcast over heads.
        let cos = self
            .rope_cos
            .index_select(0, &positions.reshape([-1]))
            .view([b, 1, t, hd / 2]);
        let sin = self
            .rope_sin
            .index_select(0, &positions.reshape([-1]))
            .view([b, 1, t, hd / 2]);
        for (i, block) in self.blocks.iter().enumerate() {
            let qkv = block.qkv.forward(&block.ln1.forward(&x));
            let parts = qkv.split(d, -1);
            let split_heads = |t_: &Tensor| t_.view([b, t, h, hd]).transpose(1, 2);
            let q = rotate(&split_heads(&parts[0]), &cos, &sin);
            let mut k = rotate(&split_heads(&parts[1]), &cos, &sin);
            let mut v = split_heads(&parts[2]);
            if let Some(cache) = cache.as_deref_mut() {
                if cache.layers.len() <= i {
                    cache.layers.resize_with(i + 1, || None);
                }
                if let Some((pk, pv)) = &cache.layers[i] {
                    k = Tensor::cat(&[pk, &k], 2);
                    v = Tensor::cat(&[pv, &v], 2);
                }
                cache.layers[i] = Some((k.shallow_clone(), v.shallow_clone()));
            }
            let att = Tensor::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                bias,
                0.0,
                bias.is_none(),
                None,
                false,
            );
            let att = att.transpose(1, 2).contiguous().view([b, t, d]);
            // Not `+=`: an in-place add would overwrite a tensor autograd still needs.
            x = &x + block.proj.forward(&att);
            let mlp = block
                .fc2
                .forward(&block.fc1.forward(&block.ln2.forward(&x)).gelu("none"));
            x = &x + mlp;
        }
        self.head.forward(&self.ln_f.forward(&x))
    }

    /// Logits `[B, T, V]` of right-padded training sequences `[B, T]` (positions 0..T, causal).
    pub fn forward_train(&self, ids: &Tensor) -> Tensor {
        let (b, t) = ids.size2().unwrap_or((1, 1));
        let positions = Tensor::arange(t, (Kind::Int64, self.device))
            .unsqueeze(0)
            .expand([b, t], false);
        self.forward(ids, &positions, None, None)
    }

    /// Log-probabilities `[B, T-1]` of `ids[:, 1:]` given their prefixes, under
    /// `softmax(logits / temperature)`, and the entropy of each of those distributions.
    pub fn token_logprobs(&self, ids: &Tensor, temperature: f64) -> (Tensor, Tensor) {
        let t = ids.size().get(1).copied().unwrap_or(1);
        let logits = self.forward_train(&ids.narrow(1, 0, t - 1));
        let logits = if temperature > 0.0 && temperature != 1.0 {
            logits / temperature
        } else {
            logits
        };
        let logp = logits.log_softmax(-1, Kind::Float);
        let targets = ids.narrow(1, 1, t - 1).unsqueeze(-1);
        let chosen = logp.gather(-1, &targets, false).squeeze_dim(-1);
        let entropy = -(logp.exp() * &logp).sum_dim_intlist(-1, false, Kind::Float);
        (chosen, entropy)
    }

    /// Continues every prompt (batched, KV cache). Rows may have different sampling params;
    /// `rngs` gives each row its random stream. A prompt with no room left in the context
    /// returns no ids with finish `Length`.
    pub fn generate(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        policy_version: u64,
    ) -> Result<Vec<Generation>> {
        let n = prompts.len();
        if params.len() != n || rngs.len() != n {
            return Err(Error::Policy(
                "prompts, params and rngs differ in length".into(),
            ));
        }
        let vocab = self.config.vocab_size;
        let max_seq = self.config.max_seq_len;
        let mut out: Vec<Generation> = (0..n)
            .map(|_| Generation {
                ids: Vec::new(),
                logprobs: Vec::new(),
                finish: FinishReason::Length,
                policy_version,
            })
            .collect();
        // Rows that can generate at least one token.
        let mut rows: Vec<usize> = Vec::with_capacity(n);
        for (i, p) in prompts.iter().enumerate() {
            params[i].validate()?;
            if let Some(&bad) = p.iter().find(|&&id| id as usize >= vocab) {
                return Err(Error::Policy(format!(
                    "prompt {i} has id {bad}, outside the vocabulary of {vocab}"
                )));
            }
            if p.is_empty() {
                return Err(Error::Policy(format!("prompt {i} is empty")));
            }
            if p.len() < max_seq {
                rows.push(i);
            }
        }
        if rows.is_empty() {
            return Ok(out);
        }
        tch::no_grad(|| self.generate_rows(prompts, params, rngs, &rows, &mut out));
        Ok(out)
    }

    fn generate_rows(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        rows: &[usize],
        out: &mut [Generation],
    ) {
        let b = rows.len();
        let max_len = rows.iter().map(|&r| prompts[r].len()).max().unwrap_or(1);
        let pad = 0i64;
        let mut ids = vec![pad; b * max_len];
        let mut valid = vec![false; b * max_len];
        let mut positions = vec![0i64; b * max_len];
        let mut next_pos = vec![0i64; b];
        for (row, &r) in rows.iter().enumerate() {
            let p = &prompts[r];
            let offset = max_len - p.len();
            for (j, &id) in p.iter().enumerate() {
                ids[row * max_len + offset + j] = id as i64;
                valid[row * max_len + offset + j] = true;
                positions[row * max_len + offset + j] = j as i64;
            }
            next_pos[row] = p.len() as i64;
        }
        let dev = self.device;
        let t = max_len as i64;
        let ids_t = Tensor::from_slice(&ids).view([b as i64, t]).to(dev);
        let pos_t = Tensor::from_slice(&positions).view([b as i64, t]).to(dev);
        let mut key_valid = Tensor::from_slice(&valid).view([b as i64, t]).to(dev);
        let causal = Tensor::ones([t, t], (Kind::Bool, dev)).tril(0);
        let allowed = causal.unsqueeze(0) * key_valid.unsqueeze(1);
        let bias = Tensor::zeros([b as i64, 1, t, t], (Kind::Float, dev))
            .masked_fill(&allowed.logical_not().unsqueeze(1), MASKED);
        let mut cache = KvCache::default();
        let logits = self.forward(&ids_t, &pos_t, Some(&bias), Some(&mut cache));
        let mut last = logits.select(1, t - 1);
        let max_steps = rows
            .iter()
            .map(|&r| params[r].max_new_tokens)
            .max()
            .unwrap_or(0);
        let max_seq = self.config.max_seq_len as i64;
        let mut active = vec![true; b];
        let vocab = self.config.vocab_size;
        for _step in 0..max_steps {
            let flat = Vec::<f32>::try_from(
                last.to_kind(Kind::Float)
                    .to(Device::Cpu)
                    .contiguous()
                    .view([-1]),
            )
            .unwrap_or_default();
            if flat.len() != b * vocab {
                break;
            }
            let mut next = vec![pad; b];
            for (row, &r) in rows.iter().enumerate() {
                if !active[row] {
                    continue;
                }
                let (id, lp) = sample_token(
                    &flat[row * vocab..(row + 1) * vocab],
                    &params[r],
                    &mut rngs[r],
                );
                let g = &mut out[r];
                g.ids.push(id);
                g.logprobs.push(lp);
                next[row] = id as i64;
                if params[r].stop_ids.contains(&id) {
                    g.finish = FinishReason::Stop;
                    active[row] = false;
                } else if g.ids.len() >= params[r].max_new_tokens || next_pos[row] + 1 >= max_seq {
                    active[row] = false;
                }
            }
            if !active.iter().any(|&a| a) {
                break;
            }
            let next_t = Tensor::from_slice(&next).view([b as i64, 1]).to(dev);
            let pos: Vec<i64> = next_pos.iter().map(|&p| p.min(max_seq - 1)).collect();
            let pos_t = Tensor::from_slice(&pos).view([b as i64, 1]).to(dev);
            for p in next_pos.iter_mut() {
                *p += 1;
            }
            key_valid = Tensor::cat(
                &[&key_valid, &Tensor::ones([b as i64, 1], (Kind::Bool, dev))],
                1,
            );
            let tk = key_valid.size()[1];
            let bias = Tensor::zeros([b as i64, 1, 1, tk], (Kind::Float, dev))
                .masked_fill(&key_valid.logical_not().view([b as i64, 1, 1, tk]), MASKED);
            let logits = self.forward(&next_t, &pos_t, Some(&bias), Some(&mut cache));
            last = logits.select(1, 0);
        }
    }
}
