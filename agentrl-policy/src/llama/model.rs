//! The [`Llama`] decoder in tch: RMSNorm, RoPE (rotate-half), grouped-query attention, SwiGLU
//! MLP, optional tied embeddings, a KV cache for batched left-padded generation.

use agentrl_core::{Error, FinishReason, Generation, Result, SamplingParams, SeededRng, TokenId};
use tch::{Device, Kind, Tensor, nn, nn::Module};

use super::config::LlamaConfig;
use crate::sampling::sample_token;

/// Attention bias value for masked positions (finite, so fully masked rows stay finite).
const MASKED: f64 = -1e9;

#[derive(Debug)]
struct Layer {
    input_norm: Tensor,
    q_proj: nn::Linear,
    k_proj: nn::Linear,
    v_proj: nn::Linear,
    o_proj: nn::Linear,
    post_norm: Tensor,
    gate_proj: nn::Linear,
    up_proj: nn::Linear,
    down_proj: nn::Linear,
}

/// Per-layer cached keys and values, `[batch, kv_heads, time, head_dim]` (not repeated).
#[derive(Debug, Default)]
struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
}

/// A Llama-family decoder whose variables carry the Hugging Face names
/// (`model.layers.0.self_attn.q_proj.weight`, ...).
#[derive(Debug)]
pub struct Llama {
    config: LlamaConfig,
    embed_tokens: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    /// `None` when the head is tied to `embed_tokens`.
    lm_head: Option<Tensor>,
    /// Rotary inverse frequencies `[head_dim / 2]`.
    inv_freq: Tensor,
    device: Device,
}

fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Tensor {
    let var = x.pow_tensor_scalar(2).mean_dim(-1, true, Kind::Float);
    x * (var + eps).rsqrt() * weight
}

/// Applies the rotate-half rotation to `x` `[B, H, T, hd]`.
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let half = x.size().last().copied().unwrap_or(2) / 2;
    let x1 = x.narrow(-1, 0, half);
    let x2 = x.narrow(-1, half, half);
    Tensor::cat(&[&x1 * cos - &x2 * sin, &x1 * sin + &x2 * cos], -1)
}

/// Repeats `[B, KV, T, hd]` key/value heads `n_rep` times to `[B, KV * n_rep, T, hd]`.
fn repeat_kv(x: &Tensor, n_rep: i64) -> Tensor {
    if n_rep == 1 {
        return x.shallow_clone();
    }
    let s = x.size();
    let (b, kv, t, hd) = (s[0], s[1], s[2], s[3]);
    x.unsqueeze(2)
        .expand([b, kv, n_rep, t, hd], false)
        .reshape([b, kv * n_rep, t, hd])
}

impl Llama {
    /// Creates the variables under `vs` (normally the VarStore root) with Hugging Face names.
    pub fn new(vs: &nn::Path, config: LlamaConfig) -> Result<Self> {
        config.validate()?;
        let d = config.hidden_size as i64;
        let hd = config.head_size() as i64;
        let q_out = config.num_attention_heads as i64 * hd;
        let kv_out = config.kv_heads() as i64 * hd;
        let ffn = config.intermediate_size as i64;
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        };
        let lin = |bias: bool| nn::LinearConfig {
            ws_init: init,
            bs_init: Some(nn::Init::Const(0.0)),
            bias,
        };
        let model = vs / "model";
        let embed_tokens =
            (&model / "embed_tokens").var("weight", &[config.vocab_size as i64, d], init);
        let norm_weight = |p: nn::Path| p.var("weight", &[d], nn::Init::Const(1.0));
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let p = &model / "layers" / i;
                let a = &p / "self_attn";
                let m = &p / "mlp";
                Layer {
                    input_norm: norm_weight(&p / "input_layernorm"),
                    q_proj: nn::linear(&a / "q_proj", d, q_out, lin(config.qkv_bias())),
                    k_proj: nn::linear(&a / "k_proj", d, kv_out, lin(config.qkv_bias())),
                    v_proj: nn::linear(&a / "v_proj", d, kv_out, lin(config.qkv_bias())),
                    o_proj: nn::linear(&a / "o_proj", q_out, d, lin(config.o_bias())),
                    post_norm: norm_weight(&p / "post_attention_layernorm"),
                    gate_proj: nn::linear(&m / "gate_proj", d, ffn, lin(false)),
                    up_proj: nn::linear(&m / "up_proj", d, ffn, lin(false)),
                    down_proj: nn::linear(&m / "down_proj", ffn, d, lin(false)),
                }
            })
            .collect();
        let norm = norm_weight(&model / "norm");
        let lm_head = (!config.tie_word_embeddings)
            .then(|| (vs / "lm_head").var("weight", &[config.vocab_size as i64, d], init));
        let inv: Vec<f32> = config.inv_freq().iter().map(|&f| f as f32).collect();
        Ok(Llama {
            inv_freq: Tensor::from_slice(&inv).to(vs.device()),
            embed_tokens,
            layers,
            norm,
            lm_head,
            device: vs.device(),
            config,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The device the variables live on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Logits `[B, T, V]` for ids `[B, T]` at `positions` `[B, T]`; `bias` is added to the
    /// attention scores (`[B, 1, T, T_keys]`), or `None` for a plain causal mask without cache.
    fn forward(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        mut cache: Option<&mut KvCache>,
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
        let cos = angles.cos().unsqueeze(1);
        let sin = angles.sin().unsqueeze(1);
        for (i, layer) in self.layers.iter().enumerate() {
            let hn = rms_norm(&x, &layer.input_norm, eps);
            let q = layer
                .q_proj
                .forward(&hn)
                .view([b, t, h, hd])
                .transpose(1, 2);
            let k = layer
                .k_proj
                .forward(&hn)
                .view([b, t, kv, hd])
                .transpose(1, 2);
            let mut v = layer
                .v_proj
                .forward(&hn)
                .view([b, t, kv, hd])
                .transpose(1, 2);
            let q = rotate(&q, &cos, &sin);
            let mut k = rotate(&k, &cos, &sin);
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
                &repeat_kv(&k, h / kv),
                &repeat_kv(&v, h / kv),
                bias,
                0.0,
                bias.is_none(),
                None,
                false,
            );
            let att = att.transpose(1, 2).contiguous().view([b, t, h * hd]);
            // Not `+=`: an in-place add would overwrite a tensor autograd still needs.
            x = &x + layer.o_proj.forward(&att);
            let hn = rms_norm(&x, &layer.post_norm, eps);
            let mlp = layer
                .down_proj
                .forward(&(layer.gate_proj.forward(&hn).silu() * layer.up_proj.forward(&hn)));
            x = &x + mlp;
        }
        let x = rms_norm(&x, &self.norm, eps);
        let head = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        x.linear::<Tensor>(head, None)
    }

    /// Logits `[B, T, V]` of right-padded sequences `[B, T]` (positions `0..T`, causal).
    pub fn logits(&self, ids: &Tensor) -> Tensor {
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
        let logits = self.logits(&ids.narrow(1, 0, t - 1));
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

    /// Continues every prompt (batched, left-padded, KV cache). Rows may have different
    /// sampling params; `rngs` gives each row its random stream. A prompt with no room left in
    /// the context returns no ids with finish `Length`.
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
        let max_seq = self.config.max_position_embeddings;
        let mut out: Vec<Generation> = (0..n)
            .map(|_| Generation {
                ids: Vec::new(),
                logprobs: Vec::new(),
                finish: FinishReason::Length,
                policy_version,
            })
            .collect();
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
        tch::no_grad(|| self.generate_rows(prompts, params, rngs, &rows, &mut out))?;
        Ok(out)
    }

    fn generate_rows(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        rows: &[usize],
        out: &mut [Generation],
    ) -> Result<()> {
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
        let bi = b as i64;
        let t = max_len as i64;
        let ids_t = Tensor::from_slice(&ids).view([bi, t]).to(dev);
        let pos_t = Tensor::from_slice(&positions).view([bi, t]).to(dev);
        let mut key_valid = Tensor::from_slice(&valid).view([bi, t]).to(dev);
        let causal = Tensor::ones([t, t], (Kind::Bool, dev)).tril(0);
        let allowed = causal.unsqueeze(0).logical_and(&key_valid.unsqueeze(1));
        let bias = Tensor::zeros([bi, 1, t, t], (Kind::Float, dev))
            .masked_fill(&allowed.logical_not().unsqueeze(1), MASKED);
        let mut cache = KvCache::default();
        let logits = self.forward(&ids_t, &pos_t, Some(&bias), Some(&mut cache));
        let mut last = logits.select(1, t - 1);
        let max_steps = rows
            .iter()
            .map(|&r| params[r].max_new_tokens)
            .max()
            .unwrap_or(0);
        let max_seq = self.config.max_position_embeddings as i64;
        let mut active = vec![true; b];
        let vocab = self.config.vocab_size;
        for _step in 0..max_steps {
            let flat = Vec::<f32>::try_from(
                last.to_kind(Kind::Float)
                    .to(Device::Cpu)
                    .contiguous()
                    .view([-1]),
            )
            .map_err(|e| Error::Policy(format!("reading logits: {e}")))?;
            if flat.len() != b * vocab {
                return Err(Error::Policy(format!(
                    "logits have {} values, expected {}",
                    flat.len(),
                    b * vocab
                )));
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
            let next_t = Tensor::from_slice(&next).view([bi, 1]).to(dev);
            let pos: Vec<i64> = next_pos.iter().map(|&p| p.min(max_seq - 1)).collect();
            let pos_t = Tensor::from_slice(&pos).view([bi, 1]).to(dev);
            for p in next_pos.iter_mut() {
                *p += 1;
            }
            key_valid = Tensor::cat(&[&key_valid, &Tensor::ones([bi, 1], (Kind::Bool, dev))], 1);
            let tk = key_valid.size()[1];
            let bias = Tensor::zeros([bi, 1, 1, tk], (Kind::Float, dev))
                .masked_fill(&key_valid.logical_not().view([bi, 1, 1, tk]), MASKED);
            let logits = self.forward(&next_t, &pos_t, Some(&bias), Some(&mut cache));
            last = logits.select(1, 0);
        }
        Ok(())
    }
}
