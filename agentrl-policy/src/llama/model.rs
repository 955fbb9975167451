//! The [`Llama`] decoder in tch: RMSNorm, RoPE (rotate-half), grouped-query attention, SwiGLU
//! MLP, optional tied embeddings, a KV cache for batched left-padded generation.

use agentrl_core::Result;
use tch::{Device, Kind, Tensor, nn, nn::Module};

use super::config::LlamaConfig;
use super::dtype::Dtype;
use super::lora::Proj;
use crate::decode::{CachedDecoder, KvStore, attention};

#[derive(Debug)]
pub(super) struct Layer {
    input_norm: Tensor,
    pub(super) q_proj: Proj,
    pub(super) k_proj: Proj,
    pub(super) v_proj: Proj,
    pub(super) o_proj: Proj,
    /// Qwen3: RMSNorm weights `[head_dim]` applied to each query and key head before RoPE.
    qk_norm: Option<(Tensor, Tensor)>,
    post_norm: Tensor,
    pub(super) gate_proj: Proj,
    pub(super) up_proj: Proj,
    pub(super) down_proj: Proj,
}

/// A Llama-family decoder whose variables carry the Hugging Face names
/// (`model.layers.0.self_attn.q_proj.weight`, ...).
#[derive(Debug)]
pub struct Llama {
    config: LlamaConfig,
    embed_tokens: Tensor,
    pub(super) layers: Vec<Layer>,
    norm: Tensor,
    /// `None` when the head is tied to `embed_tokens`.
    lm_head: Option<Tensor>,
    /// Rotary inverse frequencies `[head_dim / 2]`.
    inv_freq: Tensor,
    /// The factor cos and sin are multiplied by (YaRN's attention factor, else 1).
    rope_scaling: f64,
    device: Device,
    /// The attached LoRA adapters' settings, if any (see [`Llama::attach_lora`]).
    pub(super) lora: Option<super::lora::LoraConfig>,
    /// The base weights' type (see [`Llama::set_dtype`]).
    dtype: Dtype,
}

/// RMSNorm with its statistics in f32, the result cast back to `x`'s type before the weight.
fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Tensor {
    let xf = x.to_kind(Kind::Float);
    let var = xf.pow_tensor_scalar(2).mean_dim(-1, true, Kind::Float);
    (xf * (var + eps).rsqrt()).to_kind(x.kind()) * weight
}

/// Applies the rotate-half rotation to `x` `[B, H, T, hd]`.
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let half = x.size().last().copied().unwrap_or(2) / 2;
    let x1 = x.narrow(-1, 0, half);
    let x2 = x.narrow(-1, half, half);
    Tensor::cat(&[&x1 * cos - &x2 * sin, &x1 * sin + &x2 * cos], -1)
}

impl Llama {
    /// Creates the variables under `vs` (normally the VarStore root) with Hugging Face names,
    /// the matrices drawn at random (N(0, 0.02²)).
    pub fn new(vs: &nn::Path, config: LlamaConfig) -> Result<Self> {
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        };
        Self::with_matrix_init(vs, config, init)
    }

    /// Like [`Llama::new`], with the matrices zero: for a model whose every weight is about to
    /// be loaded or copied, which drawing 135 M random numbers (SmolLM2) would only delay.
    pub fn new_to_fill(vs: &nn::Path, config: LlamaConfig) -> Result<Self> {
        Self::with_matrix_init(vs, config, nn::Init::Const(0.0))
    }

    fn with_matrix_init(vs: &nn::Path, config: LlamaConfig, init: nn::Init) -> Result<Self> {
        config.validate()?;
        let d = config.hidden_size as i64;
        let hd = config.head_size() as i64;
        let q_out = config.num_attention_heads as i64 * hd;
        let kv_out = config.kv_heads() as i64 * hd;
        let ffn = config.intermediate_size as i64;
        let lin = |bias: bool| nn::LinearConfig {
            ws_init: init,
            bs_init: Some(nn::Init::Const(0.0)),
            bias,
        };
        let model = vs / "model";
        let embed_tokens =
            (&model / "embed_tokens").var("weight", &[config.vocab_size as i64, d], init);
        let norm_weight = |p: nn::Path| p.var("weight", &[d], nn::Init::Const(1.0));
        let head_norm_weight = |p: nn::Path| p.var("weight", &[hd], nn::Init::Const(1.0));
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let p = &model / "layers" / i;
                let a = &p / "self_attn";
                let m = &p / "mlp";
                Layer {
                    input_norm: norm_weight(&p / "input_layernorm"),
                    q_proj: Proj::linear(&a / "q_proj", d, q_out, lin(config.qkv_bias())),
                    k_proj: Proj::linear(&a / "k_proj", d, kv_out, lin(config.qkv_bias())),
                    v_proj: Proj::linear(&a / "v_proj", d, kv_out, lin(config.qkv_bias())),
                    o_proj: Proj::linear(&a / "o_proj", q_out, d, lin(config.o_bias())),
                    qk_norm: config.qk_norm().then(|| {
                        (
                            head_norm_weight(&a / "q_norm"),
                            head_norm_weight(&a / "k_norm"),
                        )
                    }),
                    post_norm: norm_weight(&p / "post_attention_layernorm"),
                    gate_proj: Proj::linear(&m / "gate_proj", d, ffn, lin(false)),
                    up_proj: Proj::linear(&m / "up_proj", d, ffn, lin(false)),
                    down_proj: Proj::linear(&m / "down_proj", ffn, d, lin(false)),
                }
            })
            .collect();
        let norm = norm_weight(&model / "norm");
        let lm_head = (!config.tie_word_embeddings)
            .then(|| (vs / "lm_head").var("weight", &[config.vocab_size as i64, d], init));
        let inv: Vec<f32> = config.inv_freq().iter().map(|&f| f as f32).collect();
        Ok(Llama {
            inv_freq: Tensor::from_slice(&inv).to(vs.device()),
            rope_scaling: config.rope_attention_scaling(),
            embed_tokens,
            layers,
            norm,
            lm_head,
            device: vs.device(),
            config,
            lora: None,
            dtype: Dtype::F32,
        })
    }

    /// Converts the base weights in `vs` (everything under `model.` and `lm_head.`) to `dtype`;
    /// LoRA adapters, attached before or after, stay f32. Activations and the KV cache follow
    /// the weights; logits are always f32.
    pub fn set_dtype(&mut self, vs: &nn::VarStore, dtype: Dtype) {
        let root = vs.root();
        for part in ["model", "lm_head"] {
            let mut path = &root / part;
            match dtype {
                Dtype::F32 => path.float(),
                Dtype::Bf16 => path.bfloat16(),
            }
        }
        self.dtype = dtype;
    }

    /// The base weights' type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The model's shape.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The device the variables live on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The final hidden states `[B, T, hidden_size]` (after the last RMSNorm, in the model's
    /// dtype) for ids `[B, T]` at `positions` `[B, T]`; `bias` is added to the attention scores
    /// (`[B, 1, T, T_keys]`), or `None` for a plain causal mask without cache.
    fn final_hidden(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        mut cache: Option<&mut dyn KvStore>,
    ) -> Tensor {
        let (b, t) = ids.size2().unwrap_or((1, 1));
        let h = self.config.num_attention_heads as i64;
        let kv = self.config.kv_heads() as i64;
        let hd = self.config.head_size() as i64;
        let d = self.config.hidden_size as i64;
        let eps = self.config.rms_norm_eps;
        let mut x = self
            .embed_tokens
            .index_select(0, &ids.reshape([-1]))
            .view([b, t, d]);
        // [B, 1, T, hd/2], broadcast over heads.
        let angles = positions.to_kind(Kind::Float).unsqueeze(-1) * self.inv_freq.view([1, 1, -1]);
        let kind = x.kind();
        let scale = self.rope_scaling;
        let cos = (angles.cos() * scale).unsqueeze(1).to_kind(kind);
        let sin = (angles.sin() * scale).unsqueeze(1).to_kind(kind);
        let bias = bias.map(|b| b.to_kind(kind));
        for (i, layer) in self.layers.iter().enumerate() {
            let hn = rms_norm(&x, &layer.input_norm, eps);
            let mut q = layer.q_proj.forward(&hn).view([b, t, h, hd]);
            let mut k = layer.k_proj.forward(&hn).view([b, t, kv, hd]);
            if let Some((q_norm, k_norm)) = &layer.qk_norm {
                q = rms_norm(&q, q_norm, eps);
                k = rms_norm(&k, k_norm, eps);
            }
            let q = q.transpose(1, 2);
            let k = k.transpose(1, 2);
            let mut v = layer
                .v_proj
                .forward(&hn)
                .view([b, t, kv, hd])
                .transpose(1, 2);
            let q = rotate(&q, &cos, &sin);
            let mut k = rotate(&k, &cos, &sin);
            if let Some(cache) = cache.as_deref_mut() {
                (k, v) = cache.extend(i, k, v);
            }
            let att = attention(&q, &k, &v, bias.as_ref());
            let att = att.transpose(1, 2).contiguous().view([b, t, h * hd]);
            // Not `+=`: an in-place add would overwrite a tensor autograd still needs.
            x = &x + layer.o_proj.forward(&att);
            let hn = rms_norm(&x, &layer.post_norm, eps);
            let mlp = layer
                .down_proj
                .forward(&(layer.gate_proj.forward(&hn).silu() * layer.up_proj.forward(&hn)));
            x = &x + mlp;
        }
        rms_norm(&x, &self.norm, eps)
    }

    /// Logits `[B, T, V]` (f32) of right-padded sequences `[B, T]` (positions `0..T`, causal).
    pub fn logits(&self, ids: &Tensor) -> Tensor {
        self.causal_logits(ids)
    }
}

impl CachedDecoder for Llama {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }
    fn context_len(&self) -> usize {
        self.config.max_position_embeddings
    }
    fn device(&self) -> Device {
        self.device
    }
    fn hidden_size(&self) -> usize {
        self.config.hidden_size
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
        let head = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        hidden.linear::<Tensor>(head, None).to_kind(Kind::Float)
    }
    fn head_weight(&self) -> Option<(&Tensor, Option<&Tensor>)> {
        Some((self.lm_head.as_ref().unwrap_or(&self.embed_tokens), None))
    }
    fn step_head(&self, hidden: &Tensor) -> Tensor {
        let head = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        crate::decode::weight_major_logits(hidden, head, None).unwrap_or_else(|| self.head(hidden))
    }
}
