//! Test weights that depend on a seed only. `tch::manual_seed` is process-global: with tests
//! building models side by side in one binary, seeding it and then initialising gave different
//! weights from run to run, and so different answers.
#![allow(dead_code)]

use tch::{Tensor, nn};

/// Overwrites the variables of `vs`, in name order, with values drawn from `seed` by a
/// generator of this file's own: every matrix normal (mean 0, std 0.02, the init `Llama::new`
/// uses), every bias zero; other vectors (norm scales) keep their constant init.
pub fn fill_from_seed(vs: &nn::VarStore, seed: u64) {
    let mut state = seed;
    // SplitMix64, then the top 53 bits as a uniform value in (0, 1].
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) + 1) as f64 / (1u64 << 53) as f64
    };
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (name, mut var) in variables {
            let shape = var.size();
            if shape.len() < 2 {
                if name.ends_with("bias") {
                    let _ = var.zero_();
                }
                continue;
            }
            let n = shape.iter().product::<i64>() as usize;
            // Box-Muller: two uniforms give one standard normal value.
            let values: Vec<f32> = (0..n)
                .map(|_| {
                    let (u, v) = (uniform(), uniform());
                    let normal = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                    (0.02 * normal) as f32
                })
                .collect();
            var.copy_(&Tensor::from_slice(&values).view(shape.as_slice()));
        }
    });
}
