//! The vocabulary head of a policy update on the CPU, without libtorch's log-softmax graph.
//!
//! The log-probability of token `y` at a position with final hidden state `h` is
//! `log p_y = (w_y · h + b_y) / T - log Σ_v exp((w_v · h + b_v) / T)`, and its gradient is
//! `(w_y - Σ_v p_v w_v) / T` for `h`, `(δ_vy - p_v) h / T` for each row `w_v` of the head and
//! `(δ_vy - p_v) / T` for the bias. So once the probabilities `P` are known, the log-probability
//! is a fixed value plus the surrogate `s = h · (w_y - Pᵀ W) / T (+ (b_y - P · b) / T)`, whose
//! gradient is exactly that, and whose value is replaced by the exact one:
//! `log p = value + (s - detach(s))`. The entropy `H` works the same way where its gradient
//! is asked for: `∂H/∂l_v = -p_v (log p_v + H) / T`, so its surrogate mixes the head's rows
//! with those weights instead of `δ_vy - p_v` (one more product each way, and that matrix kept).
//!
//! That does the head's three matrix products (the logits, `Pᵀ W` and, in the backward pass,
//! `P · ∂s/∂m` for the head's gradient) and nothing else through libtorch's autograd: the
//! softmax, the chosen log-probabilities and the entropies are one column pass in Rust
//! ([`column_softmax`]) that turns the logits into `P` in place. libtorch's graph would run a
//! log-softmax forward and backward over the same `[positions, vocabulary]` values, and a
//! gather whose backward writes a zero tensor of that size; it also keeps the log-softmax's
//! output for the backward pass, as this keeps `P`, so memory is no higher.
//!
//! The logits are computed weight-major, `W · Hᵀ` (`[V, N]`): MKL then streams the weight
//! instead of repacking it per product, and `P`'s layout suits both later products.

use tch::{Device, Kind, Tensor};

use crate::sampling::exp_nonpositive;
use crate::threads::on_threads;

/// Smallest vocabulary whose update goes through [`head_logprobs`]: measured on 49,152 ids,
/// where the head is most of an update. A small vocabulary's log-softmax costs little either
/// way, and its models (the demo's tiny GPT) keep libtorch's exact rounding.
pub(crate) const MIN_VOCAB: i64 = 16_384;

/// Most positions in one product of the head: beyond about a thousand the products run no
/// faster (768, 1,024 and 2,048 gave the tiny Llama's update the same time).
const MAX_CHUNK_POSITIONS: i64 = 1024;

/// Most logits in one product of the head (256 MiB): what a call without gradients holds at
/// once (with gradients every chunk's probabilities are kept for the backward pass anyway).
/// 1,024 positions of a 49,152-id vocabulary, 441 of Qwen2's 151,936.
const MAX_CHUNK_LOGITS: i64 = 64 << 20;

/// Vocabulary rows after which a column pass adds its running sums into the totals, so that
/// the sums' rounding grows with `rows / ROW_BLOCK + ROW_BLOCK`, not with the vocabulary.
const ROW_BLOCK: usize = 64;

/// Logits in a chunk from which [`column_softmax`] splits its rows over the libtorch threads.
const PARALLEL_VALUES: usize = 1 << 18;

/// Defines `$name`, which runs the kernel `$portable` compiled for AVX2 (as `$avx2`) where the
/// CPU has it, and as the build targets elsewhere; the arithmetic is the same lane for lane,
/// so both give the same bits.
macro_rules! avx2_dispatch {
    (
        $(#[$doc:meta])*
        fn $name:ident, $avx2:ident => $portable:ident($($arg:ident: $ty:ty),* $(,)?)
    ) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2, checked just above.
                return unsafe { $avx2($($arg),*) };
            }
            $portable($($arg),*)
        }

        #[doc = concat!("[`", stringify!($name), "`] compiled for AVX2.")]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2($($arg: $ty),*) {
            $portable($($arg),*)
        }
    };
}

/// Log-probabilities of `targets` `[N]` (int64) and entropies `[N]` under
/// `softmax((hidden · weightᵀ + bias) / temperature)` for hidden states `[N, D]` and a head
/// `weight` `[V, D]` (`bias` `[V]`), with gradients for `hidden`, `weight` and `bias`
/// wherever they require them; the entropies carry gradients too with `entropy_grad` (an
/// entropy bonus), through a second surrogate. `temperature <= 0` counts as 1.
///
/// `None` when this path does not apply: a tensor not f32 on the CPU, no positions, a target
/// outside the vocabulary (the caller's libtorch path then reports it as it always has).
pub(crate) fn head_logprobs(
    hidden: &Tensor,
    targets: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    temperature: f64,
    entropy_grad: bool,
) -> Option<(Tensor, Tensor)> {
    let on_cpu_f32 = |t: &Tensor| t.device() == Device::Cpu && t.kind() == Kind::Float;
    if !on_cpu_f32(hidden) || !on_cpu_f32(weight) || !bias.is_none_or(on_cpu_f32) {
        return None;
    }
    let (n, d) = hidden.size2().ok()?;
    let (vocab, width) = weight.size2().ok()?;
    if n == 0 || vocab == 0 || d != width || bias.is_some_and(|b| b.size() != [vocab]) {
        return None;
    }
    let index = targets.reshape([-1]).to_kind(Kind::Int64);
    let ids = Vec::<i64>::try_from(&index).ok()?;
    if ids.len() != n as usize || ids.iter().any(|&id| id < 0 || id >= vocab) {
        return None;
    }
    let inv_t = if temperature > 0.0 {
        (1.0 / temperature) as f32
    } else {
        1.0
    };
    let with_grad = grad_enabled()
        && (hidden.requires_grad()
            || weight.requires_grad()
            || bias.is_some_and(Tensor::requires_grad));

    let (w, b) = (weight.detach(), bias.map(Tensor::detach));
    let h = hidden.detach();
    let most = MAX_CHUNK_POSITIONS.min(MAX_CHUNK_LOGITS / vocab).max(1);
    let chunks = (n + most - 1) / most;
    let chunk = (n + chunks - 1) / chunks;
    let mut chosen = vec![0.0f32; n as usize];
    let mut entropies = vec![0.0f32; n as usize];
    // Per chunk, `Pᵀ W` (and `P · b`): the part of the surrogate that needs the probabilities.
    let (mut mixed_rows, mut mixed_bias) = (Vec::new(), Vec::new());
    // Per chunk, `Qᵀ W` (and `Q · b`) for the entropies' gradient, where asked for.
    let (mut entropy_rows, mut entropy_bias) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < n {
        let len = chunk.min(n - start);
        let columns = h.narrow(0, start, len).tr();
        let probs = tch::no_grad(|| match &b {
            Some(b) => b.unsqueeze(1).addmm(&w, &columns),
            None => w.mm(&columns),
        })
        .contiguous();
        let range = start as usize..(start + len) as usize;
        // SAFETY: `probs` is a contiguous f32 CPU tensor of `vocab * len` elements that this
        // function alone holds (fresh from the product, no gradient history) while the slice
        // lives.
        let values = unsafe {
            std::slice::from_raw_parts_mut(probs.data_ptr() as *mut f32, (vocab * len) as usize)
        };
        column_softmax(
            values,
            len as usize,
            inv_t,
            &ids[range.clone()],
            &mut chosen[range.clone()],
            &mut entropies[range.clone()],
            usize::try_from(tch::get_num_threads()).unwrap_or(1),
        );
        if with_grad {
            let probs_t = probs.tr();
            mixed_rows.push(probs_t.mm(weight));
            if let Some(bias) = bias {
                mixed_bias.push(probs_t.mv(bias));
            }
            if entropy_grad {
                // ∂H/∂l_v = q_v / T with q_v = -p_v (log p_v + H) (0 where p_v is 0).
                let column_entropies = Tensor::from_slice(&entropies[range]);
                let q = tch::no_grad(|| -(probs.xlogy(&probs) + &probs * column_entropies)).tr();
                entropy_rows.push(q.mm(weight));
                if let Some(bias) = bias {
                    entropy_bias.push(q.mv(bias));
                }
            }
        }
        start += len;
    }
    let values = Tensor::from_slice(&chosen);
    let entropies = Tensor::from_slice(&entropies);
    if !with_grad {
        return Some((values, entropies));
    }
    let inv_t = f64::from(inv_t);
    // The surrogate of a per-column mixture `r` of the head's rows (and of the bias): its
    // gradient is `r / T` for the hidden states, `r_v h / T` for each row and `r_v / T` for
    // the bias; its value is taken out again.
    let surrogate = |rows: Tensor, bias_terms: Option<Tensor>| {
        let s = (hidden * rows).sum_dim_intlist(-1, false, Kind::Float);
        let s = match bias_terms {
            Some(terms) => (s + terms) * inv_t,
            None => s * inv_t,
        };
        &s - s.detach()
    };
    let chosen_rows = weight.index_select(0, &index) - Tensor::cat(&mixed_rows, 0);
    let chosen_bias = bias.map(|b| b.index_select(0, &index) - Tensor::cat(&mixed_bias, 0));
    let values = values + surrogate(chosen_rows, chosen_bias);
    let entropies = match entropy_grad {
        false => entropies,
        true => {
            let bias_terms = bias.map(|_| Tensor::cat(&entropy_bias, 0));
            entropies + surrogate(Tensor::cat(&entropy_rows, 0), bias_terms)
        }
    };
    Some((values, entropies))
}

/// Whether libtorch records operations for autograd on this thread now.
fn grad_enabled() -> bool {
    let probe = Tensor::zeros([1], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    (&probe * 1.0).requires_grad()
}

/// Turns weight-major logits `[V, columns]` (row `v` holds id `v`'s logit at every position)
/// into the probabilities `softmax(logits / T)` of each column, in place, where `inv_t` is
/// `1 / T`; writes each column's log-probability of `targets[c]` to `chosen[c]` and its
/// entropy to `entropies[c]`. Three passes over the values (the column maxima; the weights
/// `exp((l - max) / T)` with their sums; the division by the sums), each split by vocabulary
/// rows over `threads` threads (one below [`PARALLEL_VALUES`]); every pass runs along rows, so
/// it reads memory in order.
fn column_softmax(
    values: &mut [f32],
    columns: usize,
    inv_t: f32,
    targets: &[i64],
    chosen: &mut [f32],
    entropies: &mut [f32],
    threads: usize,
) {
    let rows = values.len() / columns;
    let threads = if values.len() < PARALLEL_VALUES {
        1
    } else {
        threads.min(rows.div_ceil(ROW_BLOCK)).max(1)
    };
    let rows_per_part = rows.div_ceil(threads);
    let part_len = rows_per_part * columns;

    let target_logits: Vec<f32> = targets
        .iter()
        .enumerate()
        .map(|(c, &id)| values[id as usize * columns + c])
        .collect();

    let mut maxima = vec![vec![f32::NEG_INFINITY; columns]; threads];
    on_threads(
        values.chunks(part_len).zip(maxima.iter_mut()),
        |(part, max)| column_max(part, max),
    );
    let max = fold_columns(&maxima, f32::NEG_INFINITY, |a, b| if b > a { b } else { a });

    let mut sums = vec![vec![0.0f32; columns]; threads];
    let mut weighted_sums = vec![vec![0.0f32; columns]; threads];
    on_threads(
        values
            .chunks_mut(part_len)
            .zip(sums.iter_mut().zip(weighted_sums.iter_mut())),
        |(part, (sum, weighted))| column_weights(part, &max, inv_t, sum, weighted),
    );
    let sum = fold_columns(&sums, 0.0, |a, b| a + b);
    let weighted = fold_columns(&weighted_sums, 0.0, |a, b| a + b);
    let inv_sum: Vec<f32> = sum.iter().map(|&s| 1.0 / s).collect();
    on_threads(values.chunks_mut(part_len), |part| {
        scale_columns(part, &inv_sum)
    });

    for c in 0..columns {
        let log_sum = sum[c].ln();
        chosen[c] = (target_logits[c] - max[c]) * inv_t - log_sum;
        // H = -Σ p log p = log S - Σ e·y / S, with y = (l - max) / T and e = exp(y).
        entropies[c] = log_sum - weighted[c] * inv_sum[c];
    }
}

/// Combines the per-thread `parts` (each `columns` long) column by column with `op`.
fn fold_columns(parts: &[Vec<f32>], init: f32, op: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    let columns = parts.first().map_or(0, Vec::len);
    (0..columns)
        .map(|c| parts.iter().fold(init, |acc, part| op(acc, part[c])))
        .collect()
}

avx2_dispatch! {
    /// Raises `max` to each column's largest value in `part` (rows of `max.len()` values).
    fn column_max, column_max_avx2 => column_max_portable(part: &[f32], max: &mut [f32])
}

/// [`column_max`] in the instructions the build targets.
#[inline(always)]
fn column_max_portable(part: &[f32], max: &mut [f32]) {
    for row in part.chunks_exact(max.len()) {
        for (m, &l) in max.iter_mut().zip(row) {
            *m = if l > *m { l } else { *m };
        }
    }
}

avx2_dispatch! {
    /// Replaces every value `l` of `part` by its weight `e = exp((l - max[c]) * inv_t)` and
    /// adds each column's weights to `sum` and its `e · (l - max[c]) * inv_t` to `weighted`, a
    /// [`ROW_BLOCK`] of rows at a time.
    fn column_weights, column_weights_avx2 => column_weights_portable(
        part: &mut [f32],
        max: &[f32],
        inv_t: f32,
        sum: &mut [f32],
        weighted: &mut [f32]
    )
}

/// [`column_weights`] in the instructions the build targets.
#[inline(always)]
fn column_weights_portable(
    part: &mut [f32],
    max: &[f32],
    inv_t: f32,
    sum: &mut [f32],
    weighted: &mut [f32],
) {
    let columns = max.len();
    let mut block_sum = vec![0.0f32; columns];
    let mut block_weighted = vec![0.0f32; columns];
    for block in part.chunks_mut(ROW_BLOCK * columns) {
        block_sum.fill(0.0);
        block_weighted.fill(0.0);
        for row in block.chunks_exact_mut(columns) {
            for (((l, &m), s), w) in row
                .iter_mut()
                .zip(max)
                .zip(block_sum.iter_mut())
                .zip(block_weighted.iter_mut())
            {
                let y = (*l - m) * inv_t;
                let e = exp_nonpositive(y);
                *l = e;
                *s += e;
                *w += e * y;
            }
        }
        for (total, s) in sum.iter_mut().zip(&block_sum) {
            *total += s;
        }
        for (total, w) in weighted.iter_mut().zip(&block_weighted) {
            *total += w;
        }
    }
}

avx2_dispatch! {
    /// Multiplies each column of `part` by `inv_sum[c]`.
    fn scale_columns, scale_columns_avx2 => scale_columns_portable(
        part: &mut [f32],
        inv_sum: &[f32]
    )
}

/// [`scale_columns`] in the instructions the build targets.
#[inline(always)]
fn scale_columns_portable(part: &mut [f32], inv_sum: &[f32]) {
    for row in part.chunks_exact_mut(inv_sum.len()) {
        for (p, &k) in row.iter_mut().zip(inv_sum) {
            *p *= k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hidden states `[n, d]`, a head `[v, d]` with a bias, targets and loss weights, all
    /// random; the hidden states and the head require gradients.
    fn case(n: i64, d: i64, v: i64) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
        tch::manual_seed(11);
        let opts = (Kind::Float, Device::Cpu);
        let hidden = (Tensor::randn([n, d], opts) * 2.0).set_requires_grad(true);
        let weight = Tensor::randn([v, d], opts).set_requires_grad(true);
        let bias = Tensor::randn([v], opts).set_requires_grad(true);
        let targets = Tensor::randint(v, [n], (Kind::Int64, Device::Cpu));
        let loss_weights = Tensor::randn([n], opts);
        (hidden, weight, bias, targets, loss_weights)
    }

    /// The same quantities through libtorch's log-softmax and gather (the entropies with
    /// their gradient).
    fn reference(
        hidden: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        targets: &Tensor,
        temperature: f64,
    ) -> (Tensor, Tensor) {
        let logp = (hidden.linear(weight, bias) / temperature).log_softmax(-1, Kind::Float);
        let chosen = logp
            .gather(-1, &targets.unsqueeze(-1), false)
            .squeeze_dim(-1);
        let entropy = -(logp.exp() * &logp).sum_dim_intlist(-1, false, Kind::Float);
        (chosen, entropy)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    fn grads(tensors: &[&Tensor]) -> Vec<Tensor> {
        tensors.iter().map(|t| t.grad().copy()).collect()
    }

    fn zero_grads(tensors: &[&Tensor]) {
        for t in tensors {
            let mut grad = t.grad();
            if grad.defined() {
                let _ = grad.zero_();
            }
        }
    }

    #[test]
    fn values_and_gradients_match_libtorchs_log_softmax() {
        // 1,500 positions: two chunks of the head.
        for (with_bias, temperature) in [(true, 0.7), (false, 1.0), (true, 1.3)] {
            check_against_libtorch(1500, with_bias, temperature, 0.0);
        }
    }

    #[test]
    fn an_entropy_bonus_gets_libtorchs_gradient() {
        for (with_bias, temperature) in [(true, 0.7), (false, 1.0)] {
            check_against_libtorch(1100, with_bias, temperature, 0.3);
        }
    }

    /// Runs a random case of `n` positions through [`head_logprobs`] and through libtorch, with
    /// a policy loss minus `entropy_bonus` times the entropies (as `entropy_coef` makes it;
    /// 0: the entropies carry no gradient), and compares the values and every gradient.
    fn check_against_libtorch(n: i64, with_bias: bool, temperature: f64, entropy_bonus: f64) {
        let (hidden, weight, bias, targets, loss_weights) = case(n, 16, 300);
        let bias = with_bias.then_some(&bias);
        let params: Vec<&Tensor> = [&hidden, &weight].into_iter().chain(bias).collect();
        let entropy_grad = entropy_bonus != 0.0;
        let loss = |chosen: &Tensor, entropy: &Tensor| {
            let loss = (chosen * &loss_weights).sum(Kind::Float);
            match entropy_grad {
                true => loss - entropy.sum(Kind::Float) * entropy_bonus,
                false => loss,
            }
        };

        let (chosen, entropy) =
            head_logprobs(&hidden, &targets, &weight, bias, temperature, entropy_grad)
                .expect("applies");
        assert!(chosen.requires_grad() && entropy.requires_grad() == entropy_grad);
        loss(&chosen, &entropy).backward();
        let fused = grads(&params);
        zero_grads(&params);

        let (want, want_entropy) = reference(&hidden, &weight, bias, &targets, temperature);
        loss(&want, &want_entropy).backward();
        let wanted = grads(&params);
        zero_grads(&params);

        let case = format!("bias {with_bias}, T {temperature}, bonus {entropy_bonus}");
        assert!(max_diff(&chosen, &want) < 1e-4, "{case}");
        assert!(max_diff(&entropy, &want_entropy) < 1e-4, "{case}");
        for (got, want) in fused.iter().zip(&wanted) {
            let scale = want.abs().max().double_value(&[]).max(1.0);
            assert!(max_diff(got, want) / scale < 1e-5, "{case}");
        }
    }

    #[test]
    fn a_frozen_head_passes_gradients_to_the_hidden_states_only() {
        // A LoRA model's head: the base weights do not train.
        let (hidden, weight, _, targets, loss_weights) = case(64, 8, 500);
        let frozen = weight.detach();
        let (chosen, _) =
            head_logprobs(&hidden, &targets, &frozen, None, 0.8, false).expect("applies");
        (&chosen * &loss_weights).sum(Kind::Float).backward();
        let got = hidden.grad().copy();
        let _ = hidden.grad().zero_();
        let (want, _) = reference(&hidden, &frozen, None, &targets, 0.8);
        (&want * &loss_weights).sum(Kind::Float).backward();
        assert!(max_diff(&got, &hidden.grad()) < 1e-5);
        assert!(!frozen.grad().defined());
    }

    #[test]
    fn without_gradients_only_values_come_back() {
        let (hidden, weight, _, targets, _) = case(20, 8, 50);
        let (chosen, entropy) =
            tch::no_grad(|| head_logprobs(&hidden, &targets, &weight, None, 1.0, false))
                .expect("applies");
        let (want, want_entropy) = reference(&hidden, &weight, None, &targets, 1.0);
        assert!(!chosen.requires_grad() && !entropy.requires_grad());
        assert!(max_diff(&chosen, &want) < 1e-5);
        assert!(max_diff(&entropy, &want_entropy) < 1e-5);
    }

    #[test]
    fn other_inputs_are_left_to_libtorch() {
        let (hidden, weight, _, _, _) = case(4, 8, 50);
        let outside = Tensor::from_slice(&[0i64, 1, 50, 2]);
        assert!(head_logprobs(&hidden, &outside, &weight, None, 1.0, false).is_none());
        let ids = Tensor::from_slice(&[0i64, 1, 2, 3]);
        let half = weight.to_kind(Kind::BFloat16);
        assert!(head_logprobs(&hidden, &ids, &half, None, 1.0, false).is_none());
        let none = hidden.narrow(0, 0, 0);
        assert!(head_logprobs(&none, &ids.narrow(0, 0, 0), &weight, None, 1.0, false).is_none());
    }

    #[test]
    fn the_column_pass_gives_the_same_on_any_number_of_threads() {
        // Past `PARALLEL_VALUES`, so the rows are split; 7 columns, no vector width.
        let (rows, columns) = (40_000, 7);
        tch::manual_seed(3);
        let logits = Tensor::randn([rows as i64, columns as i64], (Kind::Float, Device::Cpu)) * 4.0;
        let logits = Vec::<f32>::try_from(&logits.reshape([-1])).expect("f32 values");
        let targets: Vec<i64> = (0..columns as i64).map(|c| c * 5_000).collect();
        let run = |threads: usize| {
            let mut values = logits.clone();
            let (mut chosen, mut entropy) = (vec![0.0; columns], vec![0.0; columns]);
            column_softmax(
                &mut values,
                columns,
                0.5,
                &targets,
                &mut chosen,
                &mut entropy,
                threads,
            );
            (values, chosen, entropy)
        };
        let (one, chosen, entropy) = run(1);
        let (three, chosen3, entropy3) = run(3);
        for c in 0..columns {
            // The plain f64 softmax of column c at temperature 2.
            let column: Vec<f64> = (0..rows)
                .map(|r| f64::from(logits[r * columns + c]) * 0.5)
                .collect();
            let max = column.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let log_sum = column.iter().map(|y| (y - max).exp()).sum::<f64>().ln() + max;
            let want = column[targets[c] as usize] - log_sum;
            let want_entropy: f64 = -column
                .iter()
                .map(|y| (y - log_sum).exp() * (y - log_sum))
                .sum::<f64>();
            assert!((f64::from(chosen[c]) - want).abs() < 1e-4, "column {c}");
            assert!(
                (f64::from(entropy[c]) - want_entropy).abs() < 1e-4,
                "column {c}"
            );
            assert!((f64::from(chosen3[c]) - want).abs() < 1e-4);
            assert!((f64::from(entropy3[c]) - want_entropy).abs() < 1e-4);
            let total: f64 = (0..rows).map(|r| f64::from(one[r * columns + c])).sum();
            assert!((total - 1.0).abs() < 1e-4, "column {c} sums to {total}");
        }
        let most = one
            .iter()
            .zip(&three)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(most < 1e-6);
    }
}
