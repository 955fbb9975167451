//! A small GPT-style decoder in tch: rotary position embeddings (RoPE), pre-LayerNorm blocks,
//! causal attention, a KV cache for batched generation, and log-probabilities of given ids for
//! training.

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn, nn::Module};

use crate::decode::{CachedDecoder, KvStore, attention};

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

#[derive(Debug)]
struct Block {
    ln1: nn::LayerNorm,
    qkv: nn::Linear,
    proj: nn::Linear,
    ln2: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
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
    /// Creates the variables under `vs` (names like `blocks.0.qkv.weight`), drawn from
    /// libtorch's global generator.
    pub fn new(vs: &nn::Path, config: GptConfig) -> Result<Self> {
        Self::with_init(vs, config, true)
    }

    /// [`TinyGpt::new`] with every matrix zero, drawing nothing from libtorch's generator: for
    /// weights copied or shared in right after.
    pub fn new_to_fill(vs: &nn::Path, config: GptConfig) -> Result<Self> {
        Self::with_init(vs, config, false)
    }

    /// The model with its matrices drawn at random (`random`) or zero.
    fn with_init(vs: &nn::Path, config: GptConfig, random: bool) -> Result<Self> {
        config.validate()?;
        let d = config.d_model as i64;
        let emb_cfg = nn::EmbeddingConfig {
            ws_init: if random {
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                }
            } else {
                nn::Init::Const(0.0)
            },
            ..Default::default()
        };
        let linear_cfg = if random {
            nn::LinearConfig::default()
        } else {
            nn::LinearConfig {
                ws_init: nn::Init::Const(0.0),
                bs_init: Some(nn::Init::Const(0.0)),
                bias: true,
            }
        };
        let linear = |p: nn::Path, i: i64, o: i64| nn::linear(p, i, o, linear_cfg);
        let tok_emb = nn::embedding(vs / "tok_emb", config.vocab_size as i64, d, emb_cfg);
        let (rope_cos, rope_sin) = rope_tables(&config, vs.device());
        let ffn = d * config.ffn_mult as i64;
        let blocks = (0..config.n_layers)
            .map(|i| {
                let p = vs / "blocks" / i;
                Block {
                    ln1: nn::layer_norm(&p / "ln1", vec![d], Default::default()),
                    qkv: linear(&p / "qkv", d, 3 * d),
                    proj: linear(&p / "proj", d, d),
                    ln2: nn::layer_norm(&p / "ln2", vec![d], Default::default()),
                    fc1: linear(&p / "fc1", d, ffn),
                    fc2: linear(&p / "fc2", ffn, d),
                }
            })
            .collect();
        Ok(TinyGpt {
            ln_f: nn::layer_norm(vs / "ln_f", vec![d], Default::default()),
            head: linear(vs / "head", d, config.vocab_size as i64),
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

    /// The final hidden states `[B, T, d_model]` (after `ln_f`) for ids `[B, T]` at `positions`
    /// `[B, T]`; `bias` is added to the attention scores (`[B, 1, T, T_keys]`) or `None` for a
    /// plain causal mask without a cache.
    fn final_hidden(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        mut cache: Option<&mut dyn KvStore>,
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
                (k, v) = cache.extend(i, k, v);
            }
            let att = attention(&q, &k, &v, bias);
            let att = att.transpose(1, 2).contiguous().view([b, t, d]);
            // Not `+=`: an in-place add would overwrite a tensor autograd still needs.
            x = &x + block.proj.forward(&att);
            let mlp = block
                .fc2
                .forward(&block.fc1.forward(&block.ln2.forward(&x)).gelu("none"));
            x = &x + mlp;
        }
        self.ln_f.forward(&x)
    }

    /// Logits `[B, T, V]` of right-padded training sequences `[B, T]` (positions 0..T, causal).
    pub fn forward_train(&self, ids: &Tensor) -> Tensor {
        self.causal_logits(ids)
    }
}

impl CachedDecoder for TinyGpt {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }
    fn context_len(&self) -> usize {
        self.config.max_seq_len
    }
    fn device(&self) -> Device {
        self.device
    }
    fn hidden_size(&self) -> usize {
        self.config.d_model
    }
    fn hidden(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        cache: Option<&mut dyn KvStore>,
    ) -> Tensor {
        self.final_hidden(ids, positions, bias, cache)
    }
    fn head(&self, hidden: &Tensor) -> Tensor {
        self.head.forward(hidden)
    }
    fn head_weight(&self) -> Option<(&Tensor, Option<&Tensor>)> {
        Some((&self.head.ws, self.head.bs.as_ref()))
    }
    fn step_head(&self, hidden: &Tensor) -> Tensor {
        crate::decode::weight_major_logits(hidden, &self.head.ws, self.head.bs.as_ref())
            .unwrap_or_else(|| self.head(hidden))
    }
}
