//! AdamW's update of one weight as a single pass over CPU memory. The tensor formulation in
//! [`super::AdamW`] runs about a dozen elementwise operations per weight, each reading and
//! writing whole tensors, plus eight more for the stochastic rounding of a bf16 weight; on
//! SmolLM2's 135 M weights that is about 2 s per step. Here each element's gradient, moments
//! and weight are read once and written once, in cache-sized chunks split over the libtorch
//! thread count. The arithmetic is the tensor path's, in f32 and in the same order, and the
//! rounding bits are [`super::stochastic_bf16`]'s, so both paths agree (see the tests).
//!
//! It applies to contiguous CPU tensors of the expected kinds only; [`try_step`] says when it
//! did not, and the caller takes the tensor path (GPU weights, views).

use std::ops::Range;

use tch::{Device, Kind, Tensor};

/// Elements per chunk: a chunk's weights are rounded while they are still in the L2 cache.
const CHUNK: usize = 1 << 14;
/// Below this many elements one thread does the whole weight.
const PARALLEL_FROM: usize = 1 << 17;

/// The scalars of one AdamW step, in f32 as the tensor operations apply them.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepScalars {
    /// Multiplies the gradient first (global-norm clipping), when clipping applies.
    pub grad_scale: Option<f32>,
    /// Multiplies the weight (decoupled weight decay), when the decay is not zero.
    pub decay: Option<f32>,
    /// The first moment's decay.
    pub beta1: f32,
    /// `1 - beta1`, computed in f64 as the tensor path's scalar is.
    pub one_minus_beta1: f32,
    /// The second moment's decay.
    pub beta2: f32,
    /// `1 - beta2`, computed in f64.
    pub one_minus_beta2: f32,
    /// `sqrt(1 - beta2^t)`: the second moment's bias correction.
    pub bias2_sqrt: f32,
    /// Added to the corrected second moment's root.
    pub eps: f32,
    /// `-lr / (1 - beta1^t)`.
    pub neg_step_size: f32,
    /// The step's and parameter's salt of the rounding hash ([`super::rounding_salt`]).
    pub salt: i32,
}

/// The uniform 16-bit number added below a master weight's bf16 half before it is cut off:
/// a multiply-xorshift hash of the element's index and the salt. [`super::stochastic_bf16`]
/// computes the same with tensor operations (wrapping 32-bit products, arithmetic shifts).
#[inline]
fn rounding_noise(index: usize, salt: i32) -> i32 {
    let mut h = (index as i32) ^ salt;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    h = h.wrapping_mul(0x297A_2D39);
    h ^= h >> 15;
    h & 0xFFFF
}

/// `master` as bf16 bits, stochastically rounded with the noise of element `index`.
#[inline]
fn round_to_bf16_bits(master: f32, index: usize, salt: i32) -> u16 {
    let bits = (master.to_bits() as i32).wrapping_add(rounding_noise(index, salt));
    ((bits as u32) >> 16) as u16
}

/// Takes one AdamW step of `var` with gradient `grad` and fp32 moments `m`, `v` (and fp32
/// `master` for a bf16 `var`, which then receives it stochastically rounded) in one pass over
/// their memory. Returns `false`, having touched nothing, unless all of them are contiguous
/// CPU tensors of one length that do not overlap, `m` and `v` are fp32, and `var` is fp32
/// without a master or bf16 with an fp32 master, its gradient of its own kind.
pub(super) fn try_step(
    var: &Tensor,
    grad: &Tensor,
    m: &Tensor,
    v: &Tensor,
    master: Option<&Tensor>,
    scalars: &StepScalars,
) -> bool {
    let n = var.numel();
    let all: Vec<&Tensor> = [var, grad, m, v].into_iter().chain(master).collect();
    let fits = all
        .iter()
        .all(|t| t.device() == Device::Cpu && t.is_contiguous() && t.numel() == n);
    let kinds = m.kind() == Kind::Float
        && v.kind() == Kind::Float
        && grad.kind() == var.kind()
        && match (var.kind(), master) {
            (Kind::Float, None) => true,
            (Kind::BFloat16, Some(master)) => master.kind() == Kind::Float,
            _ => false,
        };
    if !fits || !kinds || n == 0 || !disjoint(&all) {
        return false;
    }
    // SAFETY: every tensor is a live, contiguous CPU tensor of `n` elements of the kind each
    // slice is typed with (checked above), so each pointer covers `n` elements of that type;
    // their byte ranges do not overlap (`disjoint`), so the mutable slices alias nothing; the
    // tensors outlive the slices, which end with this function, and the caller holds the
    // optimiser mutably, so no other code of ours touches them meanwhile.
    unsafe {
        let m = std::slice::from_raw_parts_mut(m.data_ptr() as *mut f32, n);
        let v = std::slice::from_raw_parts_mut(v.data_ptr() as *mut f32, n);
        match master {
            None => {
                let w = std::slice::from_raw_parts_mut(var.data_ptr() as *mut f32, n);
                let g = std::slice::from_raw_parts(grad.data_ptr() as *const f32, n);
                parallel_step(scalars, g, |g: f32| g, m, v, w, None);
            }
            Some(master) => {
                let w = std::slice::from_raw_parts_mut(master.data_ptr() as *mut f32, n);
                let g = std::slice::from_raw_parts(grad.data_ptr() as *const u16, n);
                let out = std::slice::from_raw_parts_mut(var.data_ptr() as *mut u16, n);
                parallel_step(scalars, g, bf16_to_f32, m, v, w, Some(out));
            }
        }
    }
    true
}

/// A bf16 value (its bits) as f32: exact.
#[inline]
fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Whether the byte ranges of `tensors` are pairwise disjoint.
fn disjoint(tensors: &[&Tensor]) -> bool {
    let mut ranges: Vec<Range<usize>> = tensors
        .iter()
        .map(|t| {
            let start = t.data_ptr() as usize;
            start..start + t.numel() * t.kind().elt_size_in_bytes()
        })
        .collect();
    ranges.sort_by_key(|r| r.start);
    ranges.windows(2).all(|w| w[0].end <= w[1].start)
}

/// [`step_elements`] over the whole weight, its elements split into one contiguous part per
/// libtorch thread.
fn parallel_step<G, F>(
    scalars: &StepScalars,
    grad: &[G],
    to_f32: F,
    m: &mut [f32],
    v: &mut [f32],
    w: &mut [f32],
    out: Option<&mut [u16]>,
) where
    G: Copy + Sync,
    F: Fn(G) -> f32 + Copy + Send + Sync,
{
    let n = w.len();
    let threads = usize::try_from(tch::get_num_threads()).unwrap_or(1).max(1);
    if threads == 1 || n < PARALLEL_FROM {
        step_elements(scalars, grad, to_f32, m, v, w, out, 0);
        return;
    }
    let part = n.div_ceil(threads);
    let mut out_parts: Vec<Option<&mut [u16]>> = match out {
        Some(out) => out.chunks_mut(part).map(Some).collect(),
        None => (0..n.div_ceil(part)).map(|_| None).collect(),
    };
    std::thread::scope(|scope| {
        let parts = grad
            .chunks(part)
            .zip(m.chunks_mut(part))
            .zip(v.chunks_mut(part))
            .zip(w.chunks_mut(part))
            .zip(out_parts.iter_mut());
        for (index, ((((g, m), v), w), out)) in parts.enumerate() {
            let out = out.take();
            scope.spawn(move || step_elements(scalars, g, to_f32, m, v, w, out, index * part));
        }
    });
}

/// The AdamW update of a run of elements (the first has index `first` in its weight), chunk
/// by chunk: moments and fp32 weight, then the bf16 copy when `out` is given.
#[allow(clippy::too_many_arguments)]
fn step_elements<G: Copy, F: Fn(G) -> f32>(
    s: &StepScalars,
    grad: &[G],
    to_f32: F,
    m: &mut [f32],
    v: &mut [f32],
    w: &mut [f32],
    mut out: Option<&mut [u16]>,
    first: usize,
) {
    for start in (0..w.len()).step_by(CHUNK) {
        let end = (start + CHUNK).min(w.len());
        let rows = grad[start..end]
            .iter()
            .zip(&mut m[start..end])
            .zip(&mut v[start..end])
            .zip(&mut w[start..end]);
        for (((&g, m), v), w) in rows {
            let mut g = to_f32(g);
            if let Some(scale) = s.grad_scale {
                g *= scale;
            }
            if let Some(decay) = s.decay {
                *w *= decay;
            }
            *m = *m * s.beta1 + g * s.one_minus_beta1;
            *v = *v * s.beta2 + g * (g * s.one_minus_beta2);
            let denom = v.sqrt() / s.bias2_sqrt + s.eps;
            *w += *m * s.neg_step_size / denom;
        }
        if let Some(out) = out.as_deref_mut() {
            let base = first + start;
            for (i, (o, &w)) in out[start..end].iter_mut().zip(&w[start..end]).enumerate() {
                *o = round_to_bf16_bits(w, base + i, s.salt);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AdamW, stochastic_bf16};
    use super::*;
    use tch::nn;

    /// `n` deterministic pseudo-random values around `centre` with spread `spread`.
    fn values(n: usize, seed: u64, centre: f32, spread: f32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                centre + spread * ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            })
            .collect()
    }

    /// Three AdamW steps (weight decay, the gradient clipped) of a `kind` weight of `n`
    /// elements, fused or with tensor operations; the weight and the moments after them.
    fn three_steps(n: usize, kind: Kind, fused: bool) -> (Tensor, Tensor, Tensor) {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let start = Tensor::from_slice(&values(n, 1, 0.05, 0.1));
        let w = vs.root().var_copy("w", &start);
        if kind != Kind::Float {
            vs.set_kind(kind);
        }
        let w = vs.variables().remove("w").unwrap_or(w);
        let mut opt = AdamW::new(&vs, 1e-3, 0.01).with_fused(fused);
        for seed in 2..5 {
            opt.zero_grad();
            let g = Tensor::from_slice(&values(n, seed, 0.0, 2.0)).to_kind(kind);
            (&w * g).sum(Kind::Float).backward();
            // The gradient's norm is far above 1: every step clips it.
            opt.clip_and_step(1.0, "test", 0.0);
        }
        let state = |slot: &str| {
            opt.state_tensors()
                .into_iter()
                .find(|(name, _)| name == &format!("{slot}.w"))
                .map(|(_, t)| t)
                .unwrap_or_else(|| Tensor::zeros([1], (Kind::Float, Device::Cpu)))
        };
        (w.to_kind(Kind::Float), state("m"), state("v"))
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    #[test]
    fn fp32_steps_match_the_tensor_operations() {
        // Over PARALLEL_FROM elements, so the weight is split between threads.
        let n = PARALLEL_FROM + 1_001;
        let (w, m, v) = three_steps(n, Kind::Float, true);
        let (w0, m0, v0) = three_steps(n, Kind::Float, false);
        assert_eq!(w.size(), [n as i64]);
        assert!(max_diff(&w, &w0) < 1e-7, "weights {}", max_diff(&w, &w0));
        assert!(max_diff(&m, &m0) < 1e-7, "m {}", max_diff(&m, &m0));
        assert!(max_diff(&v, &v0) < 1e-7, "v {}", max_diff(&v, &v0));
        // And the step did move the weights.
        assert!(max_diff(&w, &Tensor::from_slice(&values(n, 1, 0.05, 0.1))) > 1e-3);
    }

    #[test]
    fn bf16_steps_match_the_tensor_operations_and_round_alike() {
        let n = PARALLEL_FROM + 1_001;
        let (w, m, v) = three_steps(n, Kind::BFloat16, true);
        let (w0, m0, v0) = three_steps(n, Kind::BFloat16, false);
        assert!(max_diff(&m, &m0) < 1e-7, "m {}", max_diff(&m, &m0));
        assert!(max_diff(&v, &v0) < 1e-7, "v {}", max_diff(&v, &v0));
        // The bf16 weights are the same stochastic roundings of (nearly) the same masters.
        let same = w.eq_tensor(&w0).to_kind(Kind::Float).mean(Kind::Float);
        let same = same.double_value(&[]);
        assert!(same > 0.999, "{same} of the bf16 weights agree");
    }

    #[test]
    fn the_rounding_bits_are_the_tensor_hashs() {
        let master = values(70_000, 7, -0.3, 4.0);
        for (step, param) in [(1, 0), (17, 5), (1 << 40, 300)] {
            let salt = super::super::rounding_salt(step, param);
            let ours: Vec<f32> = master
                .iter()
                .enumerate()
                .map(|(i, &x)| bf16_to_f32(round_to_bf16_bits(x, i, salt)))
                .collect();
            let tensor = stochastic_bf16(&Tensor::from_slice(&master), step, param);
            let theirs = Vec::<f32>::try_from(&tensor.to_kind(Kind::Float)).unwrap_or_default();
            assert_eq!(ours, theirs, "step {step}, parameter {param}");
        }
    }

    #[test]
    fn tensors_it_cannot_read_in_place_are_left_to_the_tensor_path() {
        let scalars = StepScalars {
            grad_scale: None,
            decay: None,
            beta1: 0.9,
            one_minus_beta1: 0.1,
            beta2: 0.95,
            one_minus_beta2: 0.05,
            bias2_sqrt: 0.2,
            eps: 1e-8,
            neg_step_size: -0.1,
            salt: 0,
        };
        let f32s = |n: i64| Tensor::ones([n], (Kind::Float, Device::Cpu));
        let (w, g, m, v) = (f32s(4), f32s(4), f32s(4), f32s(4));
        // A view that is not contiguous.
        let strided = f32s(8).slice(0, 0, 8, 2);
        assert!(!try_step(&w, &strided, &m, &v, None, &scalars));
        // A bf16 weight without its master, and one whose gradient is fp32.
        let b = w.to_kind(Kind::BFloat16);
        assert!(!try_step(
            &b,
            &g.to_kind(Kind::BFloat16),
            &m,
            &v,
            None,
            &scalars
        ));
        assert!(!try_step(&b, &g, &m, &v, Some(&f32s(4)), &scalars));
        // Moments that share memory.
        assert!(!try_step(&w, &g, &m, &m, None, &scalars));
        // Lengths that differ.
        assert!(!try_step(&w, &g, &m, &f32s(5), None, &scalars));
        // And the weight is untouched by all of these.
        assert_eq!(Vec::<f32>::try_from(&w).unwrap_or_default(), vec![1.0; 4]);
        assert!(try_step(&w, &g, &m, &v, None, &scalars));
        assert_ne!(Vec::<f32>::try_from(&w).unwrap_or_default(), vec![1.0; 4]);
    }
}
