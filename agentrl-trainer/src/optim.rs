//! AdamW with its state in the open: the moment estimates, the step count and, for weights
//! stored below fp32 (bf16, f16), an fp32 master copy of each weight. Checkpoints save this
//! state ([`AdamW::state_tensors`]) and a resumed run loads it ([`AdamW::load_state`]), so it
//! continues with the optimiser it was interrupted with.
//!
//! The update is PyTorch's AdamW (decoupled weight decay, bias-corrected moments) computed in
//! fp32 whatever the weights' dtype: a low-precision weight takes its value from its master
//! copy after every step, so small updates accumulate instead of rounding away. A bf16 weight
//! takes it stochastically rounded, so the weights the model computes with follow the master
//! in expectation from the first step on (see `stochastic_bf16`).

mod fused;

use std::collections::HashMap;

use agentrl_core::{Error, Result};
use tch::{Kind, Tensor, nn};

/// The first moment's decay.
const BETA1: f64 = 0.9;
/// The second moment's decay.
const BETA2: f64 = 0.95;
/// Added to the second moment's root.
const EPS: f64 = 1e-8;

/// One trainable weight and its optimiser state (allocated at the first step).
struct Param {
    /// The variable's name in its VarStore.
    name: String,
    /// The variable (shares storage with the VarStore's).
    var: Tensor,
    /// First moment (fp32).
    m: Option<Tensor>,
    /// Second moment (fp32).
    v: Option<Tensor>,
    /// fp32 copy of a weight stored below fp32.
    master: Option<Tensor>,
}

/// AdamW over the trainable variables of a VarStore (see the module docs).
pub struct AdamW {
    params: Vec<Param>,
    lr: f64,
    weight_decay: f64,
    steps: i64,
    /// Take the one-pass step ([`fused::try_step`]) where it applies.
    fused: bool,
}

/// What [`AdamW::clip_and_step`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimiserStep {
    /// Global gradient norm before clipping (0 without gradients).
    pub grad_norm: f64,
    /// The loss or the gradients were not finite, so no step was taken.
    pub skipped_non_finite: bool,
}

impl AdamW {
    /// AdamW (β = 0.9, 0.95) at `lr` with decoupled `weight_decay` over `vs`'s trainable
    /// variables, in name order.
    pub fn new(vs: &nn::VarStore, lr: f64, weight_decay: f64) -> Self {
        let mut params: Vec<Param> = vs
            .variables()
            .into_iter()
            .filter(|(_, var)| var.requires_grad())
            .map(|(name, var)| Param {
                name,
                var,
                m: None,
                v: None,
                master: None,
            })
            .collect();
        params.sort_by(|a, b| a.name.cmp(&b.name));
        AdamW {
            params,
            lr,
            weight_decay,
            steps: 0,
            fused: true,
        }
    }

    /// Whether a step updates each contiguous CPU weight in one pass over its memory (the
    /// default) or with tensor operations only, as it does on a GPU. Both compute the same
    /// values (benchmarks compare them).
    pub fn with_fused(mut self, fused: bool) -> Self {
        self.fused = fused;
        self
    }

    /// Sets the learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Steps taken so far.
    pub fn steps(&self) -> i64 {
        self.steps
    }

    /// Zeroes every gradient.
    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.var.zero_grad();
        }
    }

    /// Forgets the moments, the step count and the master copies (after the weights were
    /// replaced from outside, e.g. loaded from a file).
    pub fn reset(&mut self) {
        self.steps = 0;
        for p in &mut self.params {
            p.m = None;
            p.v = None;
            p.master = None;
        }
    }

    /// The global norm of the gradients; `None` when no variable has one.
    fn grad_norm(&self) -> Option<f64> {
        tch::no_grad(|| {
            let norms: Vec<Tensor> = self
                .params
                .iter()
                .map(|p| p.var.grad())
                .filter(|g| g.defined())
                .map(|g| g.to_kind(Kind::Float).norm().square())
                .collect();
            (!norms.is_empty()).then(|| {
                Tensor::stack(&norms, 0)
                    .sum(Kind::Float)
                    .sqrt()
                    .double_value(&[])
            })
        })
    }

    /// When the gradients' global norm and `loss` are finite: scales the gradients down to a
    /// global norm of at most `grad_clip` and takes a step. Otherwise nothing reaches the
    /// weights or the state, and a warning says `what` was skipped.
    pub fn clip_and_step(&mut self, grad_clip: f64, what: &str, loss: f64) -> OptimiserStep {
        let Some(grad_norm) = self.grad_norm() else {
            return OptimiserStep {
                grad_norm: 0.0,
                skipped_non_finite: false,
            };
        };
        let finite = grad_norm.is_finite() && loss.is_finite();
        if finite {
            let scale = grad_clip / (grad_norm + 1e-6);
            self.step((scale < 1.0).then_some(scale));
        } else {
            tracing::warn!(
                "{what} update skipped: loss {loss}, gradient norm {grad_norm} (not finite); \
                 the weights and optimiser state are unchanged"
            );
        }
        OptimiserStep {
            grad_norm,
            skipped_non_finite: !finite,
        }
    }

    /// One AdamW step on the current gradients, each multiplied by `grad_scale` first: in one
    /// pass over memory per weight where [`fused::try_step`] applies (contiguous CPU weights),
    /// else with tensor operations.
    fn step(&mut self, grad_scale: Option<f64>) {
        self.steps += 1;
        let t = self.steps as f64;
        let bias1 = 1.0 - BETA1.powf(t);
        let bias2_sqrt = (1.0 - BETA2.powf(t)).sqrt();
        let step_size = self.lr / bias1;
        let decay = 1.0 - self.lr * self.weight_decay;
        // The same for every weight but the rounding salt.
        let step_scalars = fused::StepScalars {
            grad_scale: grad_scale.map(|s| s as f32),
            decay: (self.weight_decay != 0.0).then_some(decay as f32),
            beta1: BETA1 as f32,
            one_minus_beta1: (1.0 - BETA1) as f32,
            beta2: BETA2 as f32,
            one_minus_beta2: (1.0 - BETA2) as f32,
            bias2_sqrt: bias2_sqrt as f32,
            eps: EPS as f32,
            neg_step_size: -step_size as f32,
            salt: 0,
        };
        tch::no_grad(|| {
            for (index, p) in self.params.iter_mut().enumerate() {
                let raw_grad = p.var.grad();
                if !raw_grad.defined() {
                    continue;
                }
                let low_precision = p.var.kind() != Kind::Float;
                if low_precision && p.master.is_none() {
                    p.master = Some(p.var.to_kind(Kind::Float));
                }
                let zeros = || Tensor::zeros(p.var.size(), (Kind::Float, p.var.device()));
                let m = p.m.get_or_insert_with(zeros);
                let v = p.v.get_or_insert_with(zeros);
                let scalars = fused::StepScalars {
                    salt: rounding_salt(self.steps, index),
                    ..step_scalars
                };
                if self.fused
                    && fused::try_step(&p.var, &raw_grad, m, v, p.master.as_ref(), &scalars)
                {
                    continue;
                }
                let mut grad = raw_grad.to_kind(Kind::Float);
                if let Some(scale) = grad_scale {
                    grad *= scale;
                }
                let mut weight = match &p.master {
                    Some(master) => master.shallow_clone(),
                    None => p.var.shallow_clone(),
                };
                if self.weight_decay != 0.0 {
                    let _ = weight.g_mul_scalar_(decay);
                }
                let _ = m.g_mul_scalar_(BETA1);
                let _ = m.g_add_(&(&grad * (1.0 - BETA1)));
                let _ = v.g_mul_scalar_(BETA2);
                let _ = v.addcmul_(&grad, &(&grad * (1.0 - BETA2)));
                let denom = v.sqrt() / bias2_sqrt + EPS;
                let _ = weight.g_add_(&(&*m * (-step_size) / denom));
                if p.var.kind() == Kind::BFloat16 {
                    p.var.copy_(&stochastic_bf16(&weight, self.steps, index));
                } else if low_precision {
                    p.var.copy_(&weight);
                }
            }
        });
    }

    /// The state as named tensors: `step`, and per variable `m.NAME`, `v.NAME` and, for a
    /// low-precision weight, `master.NAME` (only those allocated, i.e. after a first step).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = vec![("step".to_string(), Tensor::from(self.steps))];
        for p in &self.params {
            let slots = [("m", &p.m), ("v", &p.v), ("master", &p.master)];
            for (slot, tensor) in slots {
                if let Some(t) = tensor {
                    out.push((format!("{slot}.{}", p.name), t.shallow_clone()));
                }
            }
        }
        out
    }

    /// Restores a state written by [`AdamW::state_tensors`] (from `source`, named in
    /// errors): every tensor must belong to a trainable variable and have its shape.
    pub fn load_state(&mut self, source: &str, tensors: Vec<(String, Tensor)>) -> Result<()> {
        let bad = |what: String| Error::Trainer(format!("optimiser state {source}: {what}"));
        let mut saved: HashMap<String, Tensor> = tensors.into_iter().collect();
        let step = saved
            .remove("step")
            .ok_or_else(|| bad("no `step`".into()))?;
        let steps = step
            .f_int64_value(&[])
            .map_err(|e| bad(format!("`step` is not a number: {e}")))?;
        if steps < 0 {
            return Err(bad(format!("`step` is {steps}")));
        }
        let mut restored: Vec<(usize, &'static str, Tensor)> = Vec::new();
        for (key, tensor) in saved {
            let (slot, name) = key
                .split_once('.')
                .ok_or_else(|| bad(format!("unexpected tensor `{key}`")))?;
            let slot = match slot {
                "m" => "m",
                "v" => "v",
                "master" => "master",
                _ => return Err(bad(format!("unexpected tensor `{key}`"))),
            };
            let index = self
                .params
                .iter()
                .position(|p| p.name == name)
                .ok_or_else(|| bad(format!("`{key}` names no trainable variable")))?;
            let var = &self.params[index].var;
            if tensor.size() != var.size() {
                return Err(bad(format!(
                    "`{key}` has shape {:?}, the variable has {:?}",
                    tensor.size(),
                    var.size()
                )));
            }
            let tensor = tensor.to_kind(Kind::Float).to(var.device());
            restored.push((index, slot, tensor));
        }
        self.reset();
        self.steps = steps;
        for (index, slot, tensor) in restored {
            let p = &mut self.params[index];
            match slot {
                "m" => p.m = Some(tensor),
                "v" => p.v = Some(tensor),
                _ => p.master = Some(tensor),
            }
        }
        Ok(())
    }
}

/// `master` (fp32) rounded to bf16 stochastically: a value between two bf16 neighbours goes
/// to the upper one with probability equal to its distance from the lower one over their
/// spacing, so the bf16 weight equals its master copy in expectation. Rounding to the nearest
/// instead holds a weight still until its master has moved half a spacing (1.2e-4 at 0.05),
/// which steps of 1e-5 take a dozen steps to do.
///
/// The random bits are a hash of the element's index, the optimiser step and the parameter's
/// index, not a draw from libtorch's generator: a step rounds the same way every time, so a
/// run resumed from a checkpoint continues bit for bit, and nothing else's random stream moves.
fn stochastic_bf16(master: &Tensor, step: i64, param: usize) -> Tensor {
    // bf16 is the upper half of an fp32's bits: add a uniform 16-bit number to the lower half
    // and cut it off. Wrapping 32-bit products mix the bits (a multiply-xorshift hash, the
    // same as `fused::rounding_noise`).
    let salt = rounding_salt(step, param);
    let mut h = Tensor::arange(master.numel() as i64, (Kind::Int, master.device()))
        .view(master.size().as_slice());
    let _ = h.bitwise_xor_(i64::from(salt));
    for (multiplier, shift) in [(0x2C1B_3C6D, 12), (0x297A_2D39, 15)] {
        let _ = h.g_mul_scalar_(multiplier);
        let high = h.bitwise_right_shift_tensor_scalar(shift);
        let _ = h.bitwise_xor_tensor_(&high);
    }
    let noise = h.bitwise_and(0xFFFF);
    let bits = master.contiguous().view_dtype(Kind::Int) + noise;
    // 0xFFFF_0000 as a 32-bit integer.
    bits.bitwise_and(-65_536)
        .view_dtype(Kind::Float)
        .to_kind(Kind::BFloat16)
}

/// The rounding hash's salt for optimiser step `step` and parameter number `param`.
fn rounding_salt(step: i64, param: usize) -> i32 {
    (step.wrapping_mul(0x9E37_79B9) ^ (param as i64).wrapping_mul(0x85EB_CA6B)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// A VarStore with one trainable weight `w` of `kind` holding `values`.
    fn one_weight(values: &[f32], kind: Kind) -> (nn::VarStore, Tensor) {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var_copy("w", &Tensor::from_slice(values));
        if kind != Kind::Float {
            vs.set_kind(kind);
        }
        let w = vs.variables().remove("w").unwrap_or(w);
        (vs, w)
    }

    /// Sets `w`'s gradient to `grad` through a linear loss `sum(w * grad)`.
    fn set_grad(w: &Tensor, grad: &[f32]) {
        let g = Tensor::from_slice(grad).to_kind(w.kind());
        (w * g).sum(Kind::Float).backward();
    }

    #[test]
    fn the_first_steps_follow_the_adamw_formula() {
        let (vs, w) = one_weight(&[1.0, -2.0], Kind::Float);
        let (lr, wd) = (0.1, 0.01);
        let mut opt = AdamW::new(&vs, lr, wd);
        opt.zero_grad();
        set_grad(&w, &[0.5, -1.0]);
        opt.clip_and_step(1e9, "test", 0.0);
        // Step 1: m = 0.1 g, v = 0.05 g², m̂ = g, v̂ = g², update = lr · g/(|g| + eps).
        let expected = |x: f64, g: f64| x * (1.0 - lr * wd) - lr * g / (g.abs() + EPS);
        let got = Vec::<f32>::try_from(&w).unwrap_or_default();
        assert!((got[0] as f64 - expected(1.0, 0.5)).abs() < 1e-6, "{got:?}");
        assert!(
            (got[1] as f64 - expected(-2.0, -1.0)).abs() < 1e-6,
            "{got:?}"
        );
        // Step 2 with the same gradient: m̂ and v̂ are still g and g².
        let before = got.clone();
        opt.zero_grad();
        set_grad(&w, &[0.5, -1.0]);
        opt.clip_and_step(1e9, "test", 0.0);
        let got = Vec::<f32>::try_from(&w).unwrap_or_default();
        assert!((got[0] as f64 - expected(before[0] as f64, 0.5)).abs() < 1e-6);
        assert_eq!(opt.steps(), 2);
    }

    #[test]
    fn it_follows_libtorchs_adamw() {
        use tch::nn::OptimizerConfig;
        let start = [0.5f32, -1.5, 2.0, 0.25];
        let grads = [
            [0.3f32, -0.2, 0.9, -1.1],
            [-0.4, 0.1, 0.2, 0.6],
            [1.2, -0.7, -0.3, 0.05],
            [0.0, 0.4, -0.8, 0.3],
            [-0.6, -0.6, 0.5, 0.9],
        ];
        let (ours_vs, ours) = one_weight(&start, Kind::Float);
        let (theirs_vs, theirs) = one_weight(&start, Kind::Float);
        let mut opt = AdamW::new(&ours_vs, 0.05, 0.01);
        let mut reference = nn::adamw(BETA1, BETA2, 0.01)
            .build(&theirs_vs, 0.05)
            .expect("libtorch's AdamW");
        for g in &grads {
            opt.zero_grad();
            set_grad(&ours, g);
            opt.clip_and_step(1e9, "test", 0.0);
            reference.zero_grad();
            set_grad(&theirs, g);
            reference.step();
        }
        let diff = (&ours - &theirs).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "{diff}: {ours} vs {theirs}");
    }

    #[test]
    fn gradients_are_clipped_to_the_global_norm() {
        let (vs, w) = one_weight(&[0.0, 0.0], Kind::Float);
        let mut opt = AdamW::new(&vs, 0.1, 0.0);
        set_grad(&w, &[3.0, 4.0]);
        let step = opt.clip_and_step(1.0, "test", 0.0);
        assert!((step.grad_norm - 5.0).abs() < 1e-6);
        // Adam's first step is invariant to the gradient's scale, so read the moment instead.
        let m = opt.state_tensors().into_iter().find(|(n, _)| n == "m.w");
        let m = m.map(|(_, t)| Vec::<f32>::try_from(&t).unwrap_or_default());
        assert_eq!(m.map(|m| (m[0] * 1000.0).round()), Some(60.0));
    }

    #[test]
    fn a_non_finite_loss_changes_nothing() {
        let (vs, w) = one_weight(&[1.0], Kind::Float);
        let mut opt = AdamW::new(&vs, 0.1, 0.01);
        set_grad(&w, &[1.0]);
        let step = opt.clip_and_step(1.0, "test", f64::NAN);
        assert!(step.skipped_non_finite);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap_or_default(), vec![1.0]);
        assert_eq!(opt.steps(), 0);
        assert_eq!(opt.state_tensors().len(), 1);
    }

    #[test]
    fn bf16_weights_learn_small_steps_through_their_master_copy() {
        // 1 + 1e-4 is not representable in bf16 (spacing 2^-7 near 1): without a master copy
        // every one of these steps would round away.
        let (vs, w) = one_weight(&[1.0; 4], Kind::BFloat16);
        let (vs32, w32) = one_weight(&[1.0; 4], Kind::Float);
        let mut opt = AdamW::new(&vs, 1e-4, 0.0);
        let mut opt32 = AdamW::new(&vs32, 1e-4, 0.0);
        for _ in 0..200 {
            for (opt, w) in [(&mut opt, &w), (&mut opt32, &w32)] {
                opt.zero_grad();
                set_grad(w, &[1.0; 4]);
                opt.clip_and_step(1e9, "test", 0.0);
            }
        }
        let got = w.to_kind(Kind::Float).double_value(&[0]);
        let want = w32.double_value(&[0]);
        assert!((want - 0.98).abs() < 1e-3, "fp32 moved to {want}");
        assert!((got - want).abs() < 4e-3, "bf16 {got} vs fp32 {want}");
    }

    #[test]
    fn bf16_rounding_is_unbiased_deterministic_and_keeps_exact_values() {
        // 1 + 0.3 spacings of bf16 (2^-7 near 1), 20,000 times: about 30% round up.
        let spacing = 1.0 / 128.0;
        let master = Tensor::full([20_000], 1.0 + 0.3 * spacing, (Kind::Float, Device::Cpu));
        let rounded = stochastic_bf16(&master, 3, 1).to_kind(Kind::Float);
        let up = rounded
            .gt(1.0)
            .to_kind(Kind::Float)
            .mean(Kind::Float)
            .double_value(&[]);
        assert!((up - 0.3).abs() < 0.02, "{up} rounded up");
        let low = rounded.lt(1.0).sum(Kind::Int64).int64_value(&[]);
        assert_eq!(low, 0, "only the two neighbours");
        let mean = rounded.mean(Kind::Float).double_value(&[]);
        assert!((mean - (1.0 + 0.3 * spacing)).abs() < 2e-4, "mean {mean}");
        // Negative weights round symmetrically.
        let neg = stochastic_bf16(&-&master, 3, 1).to_kind(Kind::Float);
        assert!(neg.eq_tensor(&-&rounded).all().int64_value(&[]) == 1);
        // The same step and parameter round alike; another step draws other bits.
        let again = stochastic_bf16(&master, 3, 1).to_kind(Kind::Float);
        assert!(again.equal(&rounded));
        let other = stochastic_bf16(&master, 4, 1).to_kind(Kind::Float);
        assert!(!other.equal(&rounded));
        // Values bf16 holds exactly stay as they are.
        let exact = Tensor::from_slice(&[0.0f32, 1.0, -2.5, 1.0 + 1.0 / 128.0, 3.0e-5]);
        let exact = exact.to_kind(Kind::BFloat16).to_kind(Kind::Float);
        assert!(
            stochastic_bf16(&exact, 9, 0)
                .to_kind(Kind::Float)
                .equal(&exact)
        );
    }

    #[test]
    fn a_small_bf16_step_moves_the_weights_as_fp32_does() {
        // 4,096 weights near 0.05 (bf16 spacing 2^-12 = 2.4e-4), one step of lr 1e-5: rounding
        // to the nearest would leave almost all of them where they were.
        let values: Vec<f32> = (0..4096).map(|i| 0.05 + (i % 97) as f32 * 1e-4).collect();
        let (vs, w) = one_weight(&values, Kind::BFloat16);
        let start = w.to_kind(Kind::Float);
        let (vs32, w32) = one_weight(
            &Vec::<f32>::try_from(&start).unwrap_or_default(),
            Kind::Float,
        );
        let mut opt = AdamW::new(&vs, 1e-5, 0.0);
        let mut opt32 = AdamW::new(&vs32, 1e-5, 0.0);
        for (opt, w) in [(&mut opt, &w), (&mut opt32, &w32)] {
            opt.zero_grad();
            set_grad(w, &[1.0; 4096]);
            opt.clip_and_step(1e9, "test", 0.0);
        }
        let moved = |w: &Tensor| {
            (w.to_kind(Kind::Float) - &start)
                .mean(Kind::Float)
                .double_value(&[])
        };
        let (bf16, fp32) = (moved(&w), moved(&w32));
        assert!((fp32 + 1e-5).abs() < 1e-7, "fp32 moved {fp32}");
        assert!(
            (bf16 - fp32).abs() < 2e-6,
            "bf16 moved {bf16} on average, fp32 {fp32}"
        );
    }

    #[test]
    fn saved_state_continues_exactly() {
        let run = |split: bool| {
            let (vs, w) = one_weight(&[0.3, -0.7, 1.1], Kind::Float);
            let mut opt = AdamW::new(&vs, 0.05, 0.01);
            let grads = [[0.1, -0.4, 0.9], [0.5, 0.2, -0.3], [-0.6, 0.8, 0.05]];
            for (i, g) in grads.iter().enumerate() {
                if split && i == 2 {
                    // Continue from a copy made of the state alone.
                    let state: Vec<(String, Tensor)> = opt
                        .state_tensors()
                        .into_iter()
                        .map(|(n, t)| (n, t.copy()))
                        .collect();
                    opt = AdamW::new(&vs, 0.05, 0.01);
                    opt.load_state("test", state).map_err(|e| e.to_string())?;
                }
                opt.zero_grad();
                set_grad(&w, g);
                opt.clip_and_step(1.0, "test", 0.0);
            }
            Ok::<_, String>(Vec::<f32>::try_from(&w).unwrap_or_default())
        };
        assert_eq!(run(false), run(true));
    }

    #[test]
    fn a_state_that_does_not_fit_is_an_error() {
        let (vs, _) = one_weight(&[1.0, 2.0], Kind::Float);
        let mut opt = AdamW::new(&vs, 0.1, 0.0);
        let err = |tensors: Vec<(String, Tensor)>| {
            AdamW::new(&vs, 0.1, 0.0)
                .load_state("file.safetensors", tensors)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert!(err(vec![]).is_err_and(|e| e.contains("no `step`")));
        let step = || ("step".to_string(), Tensor::from(1i64));
        let wrong_shape = (
            "m.w".to_string(),
            Tensor::zeros([3], (Kind::Float, Device::Cpu)),
        );
        assert!(err(vec![step(), wrong_shape]).is_err_and(|e| e.contains("shape")));
        let unknown = (
            "m.x".to_string(),
            Tensor::zeros([2], (Kind::Float, Device::Cpu)),
        );
        assert!(err(vec![step(), unknown]).is_err_and(|e| e.contains("no trainable")));
        assert!(opt.load_state("ok", vec![step()]).is_ok());
        assert_eq!(opt.steps(), 1);
    }
}
