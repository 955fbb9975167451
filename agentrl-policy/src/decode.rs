//! Batched, left-padded generation with a KV cache, shared by every tch decoder.
//!
//! A model implements `CachedDecoder` (its final hidden states over new ids at given
//! positions, with an attention bias and a cache, and its vocabulary head); the shared
//! `generate` does the rest: validation, left padding, per-row sampling parameters and random
//! streams, stop ids, stop strings, per-token callbacks and the context limit.

use std::sync::Arc;

use agentrl_core::{Error, FinishReason, Generation, Result, SamplingParams, SeededRng, TokenId};
use tch::{Device, Kind, Tensor};

use crate::sampling::sample_token;
use crate::threads::on_threads;

/// Attention bias value for masked positions (finite, so fully masked rows stay finite).
pub(crate) const MASKED: f64 = -1e9;

/// Where a decoder's attention layers keep keys and values between forward calls: each layer
/// hands over the keys and values of the new positions and gets back everything its queries
/// attend to. The static generation loop appends to one cache per batch; the continuous-
/// batching engine behind [`crate::TchPolicy`] writes each row into its own slot.
pub trait KvStore {
    /// Stores layer `layer`'s new keys and values `[B, KV, T, hd]` and returns the keys and
    /// values the new queries attend to, `[B, KV, T_keys, hd]`.
    fn extend(&mut self, layer: usize, k: Tensor, v: Tensor) -> (Tensor, Tensor);
}

/// Per-layer cached keys and values, `[batch, heads, time, head_dim]`, appended to by each
/// forward call.
#[derive(Debug, Default)]
pub(crate) struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
}

impl KvStore for KvCache {
    fn extend(&mut self, layer: usize, k: Tensor, v: Tensor) -> (Tensor, Tensor) {
        if self.layers.len() <= layer {
            self.layers.resize_with(layer + 1, || None);
        }
        let (k, v) = match &self.layers[layer] {
            Some((pk, pv)) => (Tensor::cat(&[pk, &k], 2), Tensor::cat(&[pv, &v], 2)),
            None => (k, v),
        };
        self.layers[layer] = Some((k.shallow_clone(), v.shallow_clone()));
        (k, v)
    }
}

/// A decoder that can run forward steps over a [`KvCache`]; every such decoder is a
/// [`PolicyModel`] (the blanket impl below supplies generation and log-probabilities).
pub(crate) trait CachedDecoder: Send + 'static {
    /// Vocabulary size.
    fn vocab_size(&self) -> usize;
    /// Longest sequence the model's positions cover.
    fn context_len(&self) -> usize;
    /// Where the model's tensors live.
    fn device(&self) -> Device;
    /// Width `D` of the hidden states.
    fn hidden_size(&self) -> usize;
    /// The final hidden states `[B, T, D]` (after the last norm) for ids `[B, T]` at
    /// `positions`; `bias` `[B, 1, T, T_keys]` is added to the attention scores (`None`: a plain
    /// causal mask), and with a `cache` the keys/values are appended to it.
    fn hidden(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: Option<&Tensor>,
        cache: Option<&mut dyn KvStore>,
    ) -> Tensor;
    /// Logits `[B, T, V]` (f32) of hidden states `[B, T, D]`.
    fn head(&self, hidden: &Tensor) -> Tensor;
    /// The head's weight `[V, D]` and bias `[V]` when [`CachedDecoder::head`] is exactly
    /// `hidden · weightᵀ + bias`; a policy update then computes its log-probabilities with
    /// [`crate::vocab_head`] instead of through libtorch's log-softmax (`None`: always through
    /// `head`).
    fn head_weight(&self) -> Option<(&Tensor, Option<&Tensor>)> {
        None
    }
    /// Logits `[B, V]` (f32) of an engine step's hidden states `[B, D]`, in whichever strides
    /// are fastest to compute: f32 models on the CPU return them weight-major (a transposed
    /// view of `W · hᵀ`, see [`weight_major_logits`]); the engine reads either layout.
    fn step_head(&self, hidden: &Tensor) -> Tensor {
        self.head(hidden)
    }

    /// Logits `[B, T, V]` for ids `[B, T]` at `positions`, with `bias` added to the attention
    /// scores and the keys/values appended to `cache`.
    fn forward_cached(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: &Tensor,
        cache: &mut dyn KvStore,
    ) -> Tensor {
        self.head(&self.hidden(ids, positions, Some(bias), Some(cache)))
    }
    /// The final hidden states `[B, T, D]` of right-padded sequences `[B, T]` (positions
    /// `0..T`, causal, no cache).
    fn causal_hidden(&self, ids: &Tensor) -> Tensor {
        let positions = causal_positions(ids, self.device());
        self.hidden(ids, &positions, None, None)
    }
    /// Logits `[B, T, V]` of right-padded sequences `[B, T]` (positions `0..T`, causal, no cache).
    fn causal_logits(&self, ids: &Tensor) -> Tensor {
        self.head(&self.causal_hidden(ids))
    }
}

/// Scaled dot-product attention of queries `[B, H, T, hd]` over keys and values
/// `[B, KV, S, hd]`, where `H` is a multiple of `KV` (grouped-query attention: query head `i`
/// reads key head `i / (H / KV)`), with `bias` `[B, 1, T, S]` added to the scores, or a causal
/// mask when there is none.
///
/// A decode step (one query per row) with a bias runs as two batched matrix products over
/// the key heads, so the cached keys and values are read in place instead of being repeated
/// per query head first: in f32 when several query heads share a key head, and always for
/// 16-bit models, whose queries, keys and values go to f32 for it (scores and weights in f32,
/// as SDPA keeps them). libtorch's CPU SDPA runs a 16-bit decode step as one matrix-vector
/// product per row and head, each starting OpenMP threads of its own inside its parallel loop
/// (7× slower than the matrix products at SmolLM2's decode shape). Everything else (one f32
/// query head per key head, prefill, training) goes to SDPA, which reads the slots' strided
/// keys faster than a matrix product does.
pub(crate) fn attention(q: &Tensor, k: &Tensor, v: &Tensor, bias: Option<&Tensor>) -> Tensor {
    let (h, t) = (q.size()[1], q.size()[2]);
    let rep = h / k.size()[1];
    match bias {
        Some(bias) if t == 1 && rep > 1 && q.kind() == Kind::Float => {
            decode_attention(q, k, v, bias)
        }
        Some(bias) if t == 1 && q.kind() != Kind::Float => {
            let f32 = |x: &Tensor| x.to_kind(Kind::Float);
            decode_attention(&f32(q), &f32(k), &f32(v), bias).to_kind(q.kind())
        }
        _ => Tensor::scaled_dot_product_attention(
            q,
            &repeat_kv(k, rep),
            &repeat_kv(v, rep),
            bias,
            0.0,
            bias.is_none(),
            None,
            false,
        ),
    }
}

/// One decode step's attention, queries `[B, H, 1, hd]` over keys and values `[B, KV, S, hd]`
/// with `bias` `[B, 1, 1, S]` added to the scores: the `H / KV` query heads of a key head are
/// the rows of one matrix product against its keys.
fn decode_attention(q: &Tensor, k: &Tensor, v: &Tensor, bias: &Tensor) -> Tensor {
    let (b, h, _, hd) = q.size4().unwrap_or((1, 1, 1, 1));
    let (kv, s) = (k.size()[1], k.size()[2]);
    let q = q.reshape([b, kv, h / kv, hd]) * (1.0 / (hd as f64).sqrt());
    let scores = q.matmul(&k.transpose(-1, -2)) + bias.to_kind(Kind::Float).view([b, 1, 1, s]);
    scores
        .softmax(-1, Kind::Float)
        .matmul(v)
        .reshape([b, h, 1, hd])
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

/// Renders generated ids as text, so generation can stop at stop strings (normally a chat
/// format's `decode`, special tokens written out).
pub type Detokenizer = Arc<dyn Fn(&[TokenId]) -> String + Send + Sync>;

/// A causal language model that [`crate::TchPolicy`] can serve and a learner can train:
/// batched generation plus the log-probabilities of given ids. [`crate::TinyGpt`] and
/// [`crate::llama::Llama`] implement it.
pub trait PolicyModel: Send + 'static {
    /// Vocabulary size.
    fn vocab_size(&self) -> usize;
    /// Longest sequence (prompt + generation) the model covers.
    fn context_len(&self) -> usize;
    /// Continues every prompt (batched, left-padded, KV cache); rows may have their own
    /// sampling params, `rngs` gives each row its random stream. Rows with stop strings need
    /// `detokenizer` to see their text.
    fn generate(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        policy_version: u64,
        detokenizer: Option<&Detokenizer>,
    ) -> Result<Vec<Generation>> {
        let mut ignore = |_: usize, _: TokenId, _: f32| {};
        self.generate_with(
            prompts,
            params,
            rngs,
            policy_version,
            detokenizer,
            &mut ignore,
        )
    }
    /// [`PolicyModel::generate`], calling `on_token(row, id, logprob)` as soon as each token of
    /// each row is sampled (for streaming).
    fn generate_with(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        policy_version: u64,
        detokenizer: Option<&Detokenizer>,
        on_token: &mut dyn FnMut(usize, TokenId, f32),
    ) -> Result<Vec<Generation>>;
    /// Log-probabilities `[B, T-1]` of `ids[:, 1:]` given their prefixes under
    /// `softmax(logits / temperature)`, and the entropy of each distribution.
    fn token_logprobs(&self, ids: &Tensor, temperature: f64) -> (Tensor, Tensor);
    /// [`PolicyModel::token_logprobs`] where `mask` `[B, T-1]` is non-zero, 0 elsewhere: what
    /// a policy update needs. The entropies carry gradients only with `entropy_grad`. The
    /// default computes every position; decoders send only the masked positions through the
    /// vocabulary head, so time and memory follow the trained tokens, not the padded batch.
    fn masked_token_logprobs(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        let (logp, entropy) = self.token_logprobs(ids, temperature);
        let entropy = if entropy_grad {
            entropy
        } else {
            entropy.detach()
        };
        (logp * mask, entropy * mask)
    }
    /// [`PolicyModel::masked_token_logprobs`] of rows that all begin with the ids `prefix`
    /// `[1, L]`: `rest` `[B, R]` holds each row's ids from position `L` on (right-padded),
    /// and `mask` `[B, R-1]` marks which of `rest[:, 1:]` to score; the results are
    /// `[B, R-1]`. Decoders run the prefix once instead of once per row (a GRPO group's shared
    /// prompt); the default builds the whole rows.
    fn prefixed_token_logprobs(
        &self,
        prefix: &Tensor,
        rest: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        let (b, r) = rest.size2().unwrap_or((1, 2));
        let l = prefix.size().get(1).copied().unwrap_or(0);
        let ids = Tensor::cat(&[prefix.expand([b, l], false), rest.shallow_clone()], 1);
        let zeros = Tensor::zeros([b, l], (mask.kind(), mask.device()));
        let full_mask = Tensor::cat(&[zeros, mask.shallow_clone()], 1);
        let (logp, entropy) =
            self.masked_token_logprobs(&ids, &full_mask, temperature, entropy_grad);
        (logp.narrow(1, l, r - 1), entropy.narrow(1, l, r - 1))
    }
    /// The final hidden states `[B, T, D]` (after the last norm, before the vocabulary
    /// projection) of right-padded `ids` `[B, T]`: what a value head reads.
    fn hidden_states(&self, ids: &Tensor) -> Tensor;
    /// Width `D` of [`PolicyModel::hidden_states`].
    fn hidden_size(&self) -> usize;
    /// Where the model's tensors live.
    fn device(&self) -> Device;
    /// One forward step of the continuous-batching engine: the logits `[B, V]` (f32) at index
    /// `last[b]` of each row of ids `[B, T]` at `positions`, with `bias` `[B, 1, T, T_keys]`
    /// added to the attention scores and the keys/values exchanged with `cache`.
    fn step_logits(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: &Tensor,
        cache: &mut dyn KvStore,
        last: &Tensor,
    ) -> Tensor;
}

impl<M: CachedDecoder> PolicyModel for M {
    fn vocab_size(&self) -> usize {
        CachedDecoder::vocab_size(self)
    }
    fn context_len(&self) -> usize {
        CachedDecoder::context_len(self)
    }
    fn generate_with(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        policy_version: u64,
        detokenizer: Option<&Detokenizer>,
        on_token: &mut dyn FnMut(usize, TokenId, f32),
    ) -> Result<Vec<Generation>> {
        let batch = Batch {
            prompts,
            params,
            detokenizer,
        };
        generate(self, &batch, rngs, policy_version, on_token)
    }
    fn token_logprobs(&self, ids: &Tensor, temperature: f64) -> (Tensor, Tensor) {
        let t = ids.size().get(1).copied().unwrap_or(1);
        let logits = self.causal_logits(&ids.narrow(1, 0, t - 1));
        next_token_logprobs(logits, ids, temperature)
    }
    fn masked_token_logprobs(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        masked_logprobs(self, ids, mask, temperature, entropy_grad)
    }
    fn prefixed_token_logprobs(
        &self,
        prefix: &Tensor,
        rest: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        prefixed_logprobs(self, prefix, rest, mask, temperature, entropy_grad)
    }
    fn hidden_states(&self, ids: &Tensor) -> Tensor {
        self.causal_hidden(ids)
    }
    fn hidden_size(&self) -> usize {
        CachedDecoder::hidden_size(self)
    }
    fn device(&self) -> Device {
        CachedDecoder::device(self)
    }
    fn step_logits(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: &Tensor,
        cache: &mut dyn KvStore,
        last: &Tensor,
    ) -> Tensor {
        let hidden = self.hidden(ids, positions, Some(bias), Some(cache));
        let (b, _, d) = hidden.size3().unwrap_or((1, 1, 1));
        // Only the positions whose next token is wanted go through the vocabulary head.
        let index = last.view([b, 1, 1]).expand([b, 1, d], false);
        self.step_head(&hidden.gather(1, &index, false).squeeze_dim(1))
    }
}

/// The logits `[B, V]` of hidden states `[B, D]` under an f32 vocabulary head `weight`
/// `[V, D]` (plus `bias` `[V]`) on the CPU, as a transposed view of `W · hᵀ` `[V, B]`, or
/// `None` where the plain product serves better (another dtype or device, or fewer than
/// [`WEIGHT_MAJOR_VOCAB`] ids). For the few rows of an engine step MKL streams a large weight
/// through `W · hᵀ` instead of repacking it, as `h · Wᵀ` does: 3.8 against 5.2 ms for the
/// tiny Llama's 49,152 × 128 head at 32 rows, 16 against 21.5 ms for SmolLM2's 49,152 × 576,
/// 89–92 against 104–121 ms for Qwen2's 151,936 × 896 (libtorch 2.13, 2 threads; in bf16 the
/// two orders are alike).
pub(crate) fn weight_major_logits(
    hidden: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> Option<Tensor> {
    let vocab = weight.size().first().copied().unwrap_or(0);
    if weight.device() != Device::Cpu || weight.kind() != Kind::Float || vocab < WEIGHT_MAJOR_VOCAB
    {
        return None;
    }
    let columns = match bias {
        Some(bias) => bias.unsqueeze(1).addmm(weight, &hidden.tr()),
        None => weight.mm(&hidden.tr()),
    };
    Some(columns.tr())
}

/// Vocabulary size from which [`weight_major_logits`] computes an engine step's logits
/// weight-major: below it, the plain product and the copy of its rows are as fast or faster
/// (4,096 ids, 32 rows: 1.2 ms either way at width 576).
const WEIGHT_MAJOR_VOCAB: i64 = 16_384;

/// Positions `0..T` for every row of right-padded ids `[B, T]`.
pub(crate) fn causal_positions(ids: &Tensor, device: Device) -> Tensor {
    let (b, t) = ids.size2().unwrap_or((1, 1));
    Tensor::arange(t, (Kind::Int64, device))
        .unsqueeze(0)
        .expand([b, t], false)
}

/// [`PolicyModel::masked_token_logprobs`] of a decoder: the hidden states of every position,
/// then [`masked_head`].
fn masked_logprobs<M: CachedDecoder>(
    model: &M,
    ids: &Tensor,
    mask: &Tensor,
    temperature: f64,
    entropy_grad: bool,
) -> (Tensor, Tensor) {
    let t = ids.size().get(1).copied().unwrap_or(2);
    let hidden = model.causal_hidden(&ids.narrow(1, 0, t - 1));
    masked_head(
        model,
        &hidden,
        &ids.narrow(1, 1, t - 1),
        mask,
        temperature,
        entropy_grad,
    )
}

/// [`PolicyModel::prefixed_token_logprobs`] of a decoder: the prefix once, its keys and values
/// then shared (broadcast, so their gradients add up) by every row's rest, which attends to
/// all of the prefix and causally to itself at positions `L..L+R`; then [`masked_head`].
fn prefixed_logprobs<M: CachedDecoder>(
    model: &M,
    prefix: &Tensor,
    rest: &Tensor,
    mask: &Tensor,
    temperature: f64,
    entropy_grad: bool,
) -> (Tensor, Tensor) {
    let device = CachedDecoder::device(model);
    let l = prefix.size().get(1).copied().unwrap_or(0);
    let (b, r) = rest.size2().unwrap_or((1, 2));
    let mut kv = SharedPrefixKv::default();
    let _ = model.hidden(
        prefix,
        &causal_positions(prefix, device),
        None,
        Some(&mut kv),
    );
    kv.rows = Some(b);
    let positions = causal_positions(rest, device) + l;
    let causal = Tensor::ones([r, r], (Kind::Float, device)).triu(1) * MASKED;
    let bias = Tensor::cat(&[Tensor::zeros([r, l], (Kind::Float, device)), causal], 1)
        .view([1, 1, r, l + r])
        .expand([b, 1, r, l + r], false);
    let hidden = model.hidden(rest, &positions, Some(&bias), Some(&mut kv));
    masked_head(
        model,
        &hidden.narrow(1, 0, r - 1),
        &rest.narrow(1, 1, r - 1),
        mask,
        temperature,
        entropy_grad,
    )
}

/// The keys and values of [`prefixed_logprobs`]: the prefix's, kept as they come (one row),
/// then prepended to the rest's, expanded to its `rows`.
#[derive(Default)]
struct SharedPrefixKv {
    layers: Vec<Option<(Tensor, Tensor)>>,
    /// Rows of the rest; `None` while the prefix runs.
    rows: Option<i64>,
}

impl KvStore for SharedPrefixKv {
    fn extend(&mut self, layer: usize, k: Tensor, v: Tensor) -> (Tensor, Tensor) {
        if self.layers.len() <= layer {
            self.layers.resize_with(layer + 1, || None);
        }
        match (self.rows, &self.layers[layer]) {
            (Some(rows), Some((pk, pv))) => {
                let expand = |t: &Tensor| {
                    let mut size = t.size();
                    size[0] = rows;
                    t.expand(size.as_slice(), false)
                };
                (
                    Tensor::cat(&[expand(pk), k], 2),
                    Tensor::cat(&[expand(pv), v], 2),
                )
            }
            _ => {
                self.layers[layer] = Some((k.shallow_clone(), v.shallow_clone()));
                (k, v)
            }
        }
    }
}

/// Logits the vocabulary head makes at once in [`masked_head`]: chunks of positions keep the
/// transient f32 logits, softmax and entropy terms near 64 MiB each.
const HEAD_CHUNK_LOGITS: i64 = 16 << 20;

/// Log-probabilities of `targets` `[B, S]` and entropies from hidden states `[B, S, D]`,
/// where `mask` `[B, S]` is non-zero (0 elsewhere): only those positions go through the
/// vocabulary head, log-softmax and entropy, a chunk at a time; the results are scattered back.
/// A large f32 head on the CPU goes through [`crate::vocab_head::head_logprobs`] (no
/// log-softmax graph), any other through libtorch.
fn masked_head<M: CachedDecoder>(
    model: &M,
    hidden: &Tensor,
    targets: &Tensor,
    mask: &Tensor,
    temperature: f64,
    entropy_grad: bool,
) -> (Tensor, Tensor) {
    let (b, s) = targets.size2().unwrap_or((1, 1));
    let device = CachedDecoder::device(model);
    let d = hidden.size().last().copied().unwrap_or(1);
    let index = mask.reshape([-1]).gt(0.0).nonzero().reshape([-1]);
    let picked = hidden.reshape([-1, d]).index_select(0, &index);
    let targets = targets.reshape([-1]).index_select(0, &index).unsqueeze(-1);
    let scatter = |values: &Tensor| {
        Tensor::zeros([b * s], (Kind::Float, device))
            .index_add(0, &index, values)
            .view([b, s])
    };
    let vocab = CachedDecoder::vocab_size(model).max(1) as i64;
    let large = vocab >= crate::vocab_head::MIN_VOCAB;
    if let Some((weight, bias)) = model.head_weight().filter(|_| large) {
        let fused = crate::vocab_head::head_logprobs(
            &picked,
            &targets,
            weight,
            bias,
            temperature,
            entropy_grad,
        );
        if let Some((chosen, entropies)) = fused {
            return (scatter(&chosen), scatter(&entropies));
        }
    }
    let head = |h: &Tensor| model.head(&h.unsqueeze(0)).squeeze_dim(0);
    let (chosen, entropies) =
        chunked_head_logprobs(head, &picked, &targets, vocab, temperature, entropy_grad);
    (scatter(&chosen), scatter(&entropies))
}

/// Log-probabilities of `targets` `[N, 1]` and entropies `[N]` of hidden states `[N, D]`
/// through libtorch: `head` (hidden states `[n, D]` to f32 logits `[n, V]`), log-softmax,
/// gather and entropy, [`HEAD_CHUNK_LOGITS`] logits at a time. The entropies carry gradients
/// only with `entropy_grad`.
fn chunked_head_logprobs(
    head: impl Fn(&Tensor) -> Tensor,
    picked: &Tensor,
    targets: &Tensor,
    vocab: i64,
    temperature: f64,
    entropy_grad: bool,
) -> (Tensor, Tensor) {
    let positions = picked.size().first().copied().unwrap_or(0);
    let chunk = (HEAD_CHUNK_LOGITS / vocab.max(1)).max(1);
    let (mut chosen, mut entropies) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < positions {
        let len = chunk.min(positions - start);
        let logits = head(&picked.narrow(0, start, len));
        let logits = if temperature > 0.0 && temperature != 1.0 {
            logits / temperature
        } else {
            logits
        };
        let logp = logits.log_softmax(-1, Kind::Float);
        chosen.push(
            logp.gather(-1, &targets.narrow(0, start, len), false)
                .squeeze_dim(-1),
        );
        let entropy = |logp: &Tensor| -(logp.exp() * logp).sum_dim_intlist(-1, false, Kind::Float);
        entropies.push(if entropy_grad {
            entropy(&logp)
        } else {
            tch::no_grad(|| {
                let logp = logp.detach();
                row_entropies(&logp).unwrap_or_else(|| entropy(&logp))
            })
        });
        start += len;
    }
    let device = picked.device();
    match chosen.is_empty() {
        true => (
            Tensor::zeros([0], (Kind::Float, device)),
            Tensor::zeros([0], (Kind::Float, device)),
        ),
        false => (Tensor::cat(&chosen, 0), Tensor::cat(&entropies, 0)),
    }
}

/// The two ways a policy update can compute the log-probabilities and entropies of a linear
/// vocabulary head `weight` `[V, D]` over hidden states `[N, D]` (targets `[N]`), for the
/// `update_head` benchmark: through libtorch's log-softmax graph (`fused: false`) or
/// [`crate::vocab_head::head_logprobs`] (`fused: true`; `None` where that does not apply).
#[doc(hidden)]
pub fn head_logprobs_for_bench(
    hidden: &Tensor,
    targets: &Tensor,
    weight: &Tensor,
    fused: bool,
) -> Option<(Tensor, Tensor)> {
    if fused {
        return crate::vocab_head::head_logprobs(hidden, targets, weight, None, 1.0, false);
    }
    let vocab = weight.size().first().copied().unwrap_or(1);
    let head = |h: &Tensor| h.linear::<Tensor>(weight, None);
    let targets = targets.reshape([-1, 1]);
    Some(chunked_head_logprobs(
        head, hidden, &targets, vocab, 1.0, false,
    ))
}

/// Log-probabilities in a chunk from which [`row_entropies`] splits its rows over the libtorch
/// threads.
const PARALLEL_ENTROPY_VALUES: usize = 1 << 20;

/// The entropy of each row of log-probabilities `[N, V]` (f32, contiguous, on the CPU; `None`
/// otherwise), without gradient: one pass over the values in Rust
/// ([`entropy_of_logprobs`](crate::sampling::entropy_of_logprobs)) instead of libtorch's
/// exponential, product and sum, which write and read two temporaries as large as the chunk
/// (52 ms against the head's 52 ms for 341 positions of a 49,152-token vocabulary).
fn row_entropies(logp: &Tensor) -> Option<Tensor> {
    let (rows, vocab) = logp.size2().ok()?;
    let usable = logp.kind() == Kind::Float && logp.device() == Device::Cpu && logp.is_contiguous();
    if !usable || rows == 0 || vocab == 0 {
        return None;
    }
    let (rows, vocab) = (rows as usize, vocab as usize);
    // SAFETY: `logp` is a contiguous f32 CPU tensor of `rows * vocab` elements, alive and not
    // written to while the slice is read.
    let values = unsafe { std::slice::from_raw_parts(logp.data_ptr() as *const f32, rows * vocab) };
    let mut out = vec![0.0f32; rows];
    let fill = |values: &[f32], out: &mut [f32]| {
        for (row, entropy) in values.chunks_exact(vocab).zip(out) {
            *entropy = crate::sampling::entropy_of_logprobs(row);
        }
    };
    let threads = usize::try_from(tch::get_num_threads()).unwrap_or(1);
    if threads <= 1 || rows < 2 || rows * vocab < PARALLEL_ENTROPY_VALUES {
        fill(values, &mut out);
    } else {
        let per_thread = rows.div_ceil(threads);
        let parts = values
            .chunks(per_thread * vocab)
            .zip(out.chunks_mut(per_thread));
        on_threads(parts, |(values, out)| fill(values, out));
    }
    Some(Tensor::from_slice(&out))
}

/// Log-probabilities `[B, T-1]` of `ids[:, 1:]` given `logits` `[B, T-1, V]` computed over
/// `ids[:, :-1]`, under `softmax(logits / temperature)`, and the entropy of each distribution.
pub(crate) fn next_token_logprobs(
    logits: Tensor,
    ids: &Tensor,
    temperature: f64,
) -> (Tensor, Tensor) {
    let t = ids.size().get(1).copied().unwrap_or(1);
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

/// Checks request `i` (`prompt` sampled with `params`) for a model with `vocab` ids; stop
/// strings need a model that can see text (`has_detokenizer`).
pub(crate) fn check_request(
    i: usize,
    prompt: &[TokenId],
    params: &SamplingParams,
    vocab: usize,
    has_detokenizer: bool,
) -> Result<()> {
    params.validate()?;
    if !params.stop.is_empty() && !has_detokenizer {
        return Err(Error::Policy(format!(
            "request {i} has stop strings {:?}, but this model was started without a \
             detokenizer to match them (give the policy the chat format's decoder, or use \
             stop ids)",
            params.stop
        )));
    }
    if let Some(&bad) = prompt.iter().find(|&&id| id as usize >= vocab) {
        return Err(Error::Policy(format!(
            "prompt {i} has id {bad}, outside the vocabulary of {vocab}"
        )));
    }
    if prompt.is_empty() {
        return Err(Error::Policy(format!("prompt {i} is empty")));
    }
    Ok(())
}

/// Continues every prompt (batched, left-padded, KV cache). Rows may have different sampling
/// params; `rngs` gives each row its random stream. A prompt with no room left in the context
/// returns no ids with finish `Length`. Rows with stop strings are matched on `detokenizer`'s
/// text of their generated ids after every token.
fn generate<M: CachedDecoder>(
    model: &M,
    batch: &Batch<'_>,
    rngs: &mut [SeededRng],
    policy_version: u64,
    on_token: &mut dyn FnMut(usize, TokenId, f32),
) -> Result<Vec<Generation>> {
    let Batch {
        prompts,
        params,
        detokenizer,
    } = *batch;
    let n = prompts.len();
    if params.len() != n || rngs.len() != n {
        return Err(Error::Policy(
            "prompts, params and rngs differ in length".into(),
        ));
    }
    let vocab = model.vocab_size();
    let max_seq = model.context_len();
    let mut out: Vec<Generation> = (0..n).map(|_| Generation::empty(policy_version)).collect();
    let mut rows: Vec<usize> = Vec::with_capacity(n);
    for (i, p) in prompts.iter().enumerate() {
        check_request(i, p, &params[i], vocab, detokenizer.is_some())?;
        if p.len() < max_seq {
            rows.push(i);
        }
    }
    if rows.is_empty() {
        return Ok(out);
    }
    tch::no_grad(|| generate_rows(model, batch, &rows, rngs, &mut out, on_token))?;
    Ok(out)
}

/// The inputs of one [`generate`] call.
struct Batch<'a> {
    prompts: &'a [Vec<TokenId>],
    params: &'a [SamplingParams],
    detokenizer: Option<&'a Detokenizer>,
}

/// The first of `stops` that the text of the generated `ids` contains, if any. Called after
/// every token, so only the tail can hold a new match: the text of the last tokens is decoded,
/// enough of them for the longest stop string even at one byte per token (plus slack for
/// tokens that decode to pieces of a character), not the whole generation each time.
pub(crate) fn find_stop(
    stops: &[String],
    ids: &[TokenId],
    detokenizer: Option<&Detokenizer>,
) -> Option<String> {
    if stops.is_empty() {
        return None;
    }
    let longest = stops.iter().map(String::len).max().unwrap_or(0);
    let window = 2 * longest + 8;
    let tail = &ids[ids.len().saturating_sub(window)..];
    let text = detokenizer.map(|d| d(tail))?;
    stops
        .iter()
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s)))
        .min_by_key(|&(at, _)| at)
        .map(|(_, s)| s.clone())
}

/// Appends a sampled `(id, logprob)` to `g` (continuing a `prompt_len`-id prompt) and says
/// whether generation ends there: at a stop id or a stop string (finish `Stop`, the string in
/// `matched_stop`), or at `max_new_tokens` or the `context` (finish stays `Length`).
pub(crate) fn push_token(
    g: &mut Generation,
    (id, logprob): (TokenId, f32),
    params: &SamplingParams,
    prompt_len: usize,
    context: usize,
    detokenizer: Option<&Detokenizer>,
) -> bool {
    g.ids.push(id);
    g.logprobs.push(logprob);
    if params.stop_ids.contains(&id) {
        g.finish = FinishReason::Stop;
        return true;
    }
    if let Some(stop) = find_stop(&params.stop, &g.ids, detokenizer) {
        g.finish = FinishReason::Stop;
        g.matched_stop = Some(stop);
        return true;
    }
    g.ids.len() >= params.max_new_tokens || prompt_len + g.ids.len() >= context
}

/// Generates for `rows` (indices into the batch's prompts that still have room).
fn generate_rows<M: CachedDecoder>(
    model: &M,
    batch: &Batch<'_>,
    rows: &[usize],
    rngs: &mut [SeededRng],
    out: &mut [Generation],
    on_token: &mut dyn FnMut(usize, TokenId, f32),
) -> Result<()> {
    let Batch {
        prompts,
        params,
        detokenizer,
    } = *batch;
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
    let dev = model.device();
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
    let logits = model.forward_cached(&ids_t, &pos_t, &bias, &mut cache);
    let mut last = logits.select(1, t - 1);
    let max_steps = rows
        .iter()
        .map(|&r| params[r].max_new_tokens)
        .max()
        .unwrap_or(0);
    let max_seq = model.context_len() as i64;
    let mut active = vec![true; b];
    let vocab = model.vocab_size();
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
            on_token(r, id, lp);
            next[row] = id as i64;
            let prompt_len = prompts[r].len();
            let ended = push_token(
                &mut out[r],
                (id, lp),
                &params[r],
                prompt_len,
                model.context_len(),
                detokenizer,
            );
            active[row] = !ended;
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
        let logits = model.forward_cached(&next_t, &pos_t, &bias, &mut cache);
        last = logits.select(1, 0);
    }
    Ok(())
}

/// A boxed model serves like the model itself, so a learner can hold "some model" and
/// [`crate::TchPolicy::spawn`] a copy of it.
impl PolicyModel for Box<dyn PolicyModel> {
    fn vocab_size(&self) -> usize {
        (**self).vocab_size()
    }
    fn context_len(&self) -> usize {
        (**self).context_len()
    }
    fn generate_with(
        &self,
        prompts: &[Vec<TokenId>],
        params: &[SamplingParams],
        rngs: &mut [SeededRng],
        policy_version: u64,
        detokenizer: Option<&Detokenizer>,
        on_token: &mut dyn FnMut(usize, TokenId, f32),
    ) -> Result<Vec<Generation>> {
        (**self).generate_with(prompts, params, rngs, policy_version, detokenizer, on_token)
    }
    fn token_logprobs(&self, ids: &Tensor, temperature: f64) -> (Tensor, Tensor) {
        (**self).token_logprobs(ids, temperature)
    }
    fn masked_token_logprobs(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        (**self).masked_token_logprobs(ids, mask, temperature, entropy_grad)
    }
    fn prefixed_token_logprobs(
        &self,
        prefix: &Tensor,
        rest: &Tensor,
        mask: &Tensor,
        temperature: f64,
        entropy_grad: bool,
    ) -> (Tensor, Tensor) {
        (**self).prefixed_token_logprobs(prefix, rest, mask, temperature, entropy_grad)
    }
    fn hidden_states(&self, ids: &Tensor) -> Tensor {
        (**self).hidden_states(ids)
    }
    fn hidden_size(&self) -> usize {
        (**self).hidden_size()
    }
    fn device(&self) -> Device {
        (**self).device()
    }
    fn step_logits(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: &Tensor,
        cache: &mut dyn KvStore,
        last: &Tensor,
    ) -> Tensor {
        (**self).step_logits(ids, positions, bias, cache, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One character per id: `a` + id.
    fn letters() -> Detokenizer {
        Arc::new(|ids: &[TokenId]| ids.iter().map(|&i| char::from(b'a' + i as u8)).collect())
    }

    /// Queries `[2, H, 1, 8]` over keys and values `[2, KV, 5, 8]`, every fourth key of row 1
    /// masked, in `kind`; and SDPA's answer computed in f32 from the same (rounded) values.
    fn decode_case(h: i64, kv: i64, kind: Kind) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
        tch::manual_seed(7);
        let q = Tensor::randn([2, h, 1, 8], (Kind::Float, Device::Cpu)).to_kind(kind);
        let k = Tensor::randn([2, kv, 5, 8], (Kind::Float, Device::Cpu)).to_kind(kind);
        let v = Tensor::randn([2, kv, 5, 8], (Kind::Float, Device::Cpu)).to_kind(kind);
        let mut bias = vec![0f32; 10];
        bias[5] = f32::NEG_INFINITY;
        bias[9] = f32::NEG_INFINITY;
        let bias = Tensor::from_slice(&bias).view([2, 1, 1, 5]);
        let f32 = |x: &Tensor| x.to_kind(Kind::Float);
        let want = Tensor::scaled_dot_product_attention(
            &f32(&q),
            &repeat_kv(&f32(&k), h / kv),
            &repeat_kv(&f32(&v), h / kv),
            Some(&bias),
            0.0,
            false,
            None,
            false,
        );
        (q, k, v, bias.to_kind(kind), want)
    }

    #[test]
    fn a_decode_step_attends_as_sdpa_does_in_f32_and_in_bf16() {
        for (h, kv) in [(4, 4), (6, 2)] {
            let (q, k, v, bias, want) = decode_case(h, kv, Kind::Float);
            let got = attention(&q, &k, &v, Some(&bias));
            let diff = (got - &want).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "f32, {h} heads over {kv}: off by {diff}");
            // bf16: the products in f32 on the rounded inputs, the result rounded once.
            let (q, k, v, bias, want) = decode_case(h, kv, Kind::BFloat16);
            let got = attention(&q, &k, &v, Some(&bias));
            assert_eq!(got.kind(), Kind::BFloat16);
            assert_eq!(got.size(), want.size());
            let diff = (got.to_kind(Kind::Float) - &want)
                .abs()
                .max()
                .double_value(&[]);
            assert!(diff < 1e-2, "bf16, {h} heads over {kv}: off by {diff}");
        }
    }

    #[test]
    fn stop_strings_are_found_in_the_tail_of_long_generations() {
        let d = letters();
        // 200 tokens of `a`, then `bcdefghijklmnopqrstu` (20 tokens) ends the generation.
        let mut ids: Vec<TokenId> = vec![0; 200];
        ids.extend(1..=20);
        let long = "bcdefghijklmnopqrstu".to_string();
        let stops = vec!["zz".to_string(), long.clone()];
        assert_eq!(find_stop(&stops, &ids, Some(&d)), Some(long.clone()));
        // One token short of the end: not yet.
        assert_eq!(find_stop(&stops, &ids[..ids.len() - 1], Some(&d)), None);
        // Of two matches ending at the same token, the one that starts first wins.
        let both = vec!["tu".to_string(), long.clone()];
        assert_eq!(find_stop(&both, &ids, Some(&d)), Some(long));
        assert_eq!(find_stop(&[], &ids, Some(&d)), None);
        assert_eq!(find_stop(&stops, &ids, None), None);
    }
}
