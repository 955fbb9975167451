//! The CUDA path against the CPU path: a Llama's logits, cached greedy generation, bf16
//! weights, and the AdamW step with fp32 master weights give on a GPU what they give on the
//! CPU.
//!
//! Each test runs when libtorch sees a CUDA device and otherwise says it was skipped;
//! `AGENTRL_REQUIRE_CUDA=1` (set by `cargo xtask gpu-check`) turns a missing device into a
//! failure, so a CPU-only libtorch cannot pass the GPU check by skipping.

use agentrl_core::{SamplingParams, SeededRng};
use agentrl_policy::PolicyModel;
use agentrl_policy::llama::{Dtype, Llama, LlamaConfig};
use agentrl_trainer::optim::AdamW;
use tch::{Device, Kind, Tensor, nn};

/// The CUDA device to test on, or `None` (after saying so) when there is none and none is
/// required.
fn cuda() -> Option<Device> {
    if tch::Cuda::is_available() {
        return Some(Device::Cuda(0));
    }
    let required = std::env::var("AGENTRL_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "AGENTRL_REQUIRE_CUDA=1 but libtorch sees no CUDA device: is LIBTORCH (or \
         LD_LIBRARY_PATH) a CUDA build of libtorch, and does `nvidia-smi` list a GPU?"
    );
    eprintln!("skipped: libtorch sees no CUDA device");
    None
}

/// Three layers, grouped-query attention, an untied head, a 256-token vocabulary.
const CONFIG: &str = r#"{"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 256,
    "max_position_embeddings": 128, "tie_word_embeddings": false, "hidden_act": "silu"}"#;

/// The same random Llama on the CPU and on `device`: weights drawn once on the CPU (every
/// variable, norms included, so that no two logits tie) and copied.
fn twin_llamas(seed: i64, device: Device) -> ((nn::VarStore, Llama), (nn::VarStore, Llama)) {
    tch::manual_seed(seed);
    let config = || LlamaConfig::from_json_str(CONFIG, "cuda test").expect("valid config");
    let cpu_vs = nn::VarStore::new(Device::Cpu);
    let cpu = Llama::new(&cpu_vs.root(), config()).expect("a Llama on the CPU");
    tch::no_grad(|| {
        for (_, mut var) in sorted(&cpu_vs) {
            let noise = Tensor::randn_like(&var) * 0.25;
            let _ = var.g_add_(&noise);
        }
    });
    let mut gpu_vs = nn::VarStore::new(device);
    let gpu = Llama::new(&gpu_vs.root(), config()).expect("a Llama on the GPU");
    gpu_vs
        .copy(&cpu_vs)
        .expect("same variables on both devices");
    ((cpu_vs, cpu), (gpu_vs, gpu))
}

/// A VarStore's variables in name order.
fn sorted(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables
}

/// Two rows of twelve ids.
fn ids() -> Tensor {
    Tensor::from_slice(&[
        1i64, 17, 99, 4, 250, 3, 77, 18, 18, 200, 5, 64, //
        9, 9, 130, 41, 6, 255, 0, 12, 88, 101, 7, 33,
    ])
    .view([2, 12])
}

/// The largest absolute difference between two tensors, on the CPU, in f32.
fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    let a = a.to(Device::Cpu).to_kind(Kind::Float);
    let b = b.to(Device::Cpu).to_kind(Kind::Float);
    (a - b).abs().max().double_value(&[])
}

#[test]
fn f32_logits_on_cuda_match_the_cpu() {
    let Some(device) = cuda() else { return };
    let ((_, cpu), (_, gpu)) = twin_llamas(1, device);
    assert_eq!(gpu.device(), device);
    let want = tch::no_grad(|| cpu.logits(&ids()));
    let got = tch::no_grad(|| gpu.logits(&ids().to(device)));
    assert_eq!(got.device(), device);
    let diff = max_diff(&got, &want);
    // f32 on both (libtorch leaves TF32 off for matmuls): only summation order differs.
    assert!(diff < 1e-4, "CUDA logits differ from the CPU's by {diff}");
}

#[test]
fn cached_greedy_generation_on_cuda_matches_the_cpu() {
    let Some(device) = cuda() else { return };
    let ((_, cpu), (_, gpu)) = twin_llamas(2, device);
    // Rows of different lengths, so left padding and the attention mask are exercised too.
    let prompts = vec![
        vec![1u32, 17, 99, 4, 250],
        vec![3u32, 77],
        vec![5u32, 6, 7, 8, 9, 10, 11],
    ];
    let params = vec![SamplingParams::greedy(16); prompts.len()];
    let run = |m: &Llama| {
        let mut rngs: Vec<SeededRng> = (0..prompts.len() as u64).map(SeededRng::new).collect();
        m.generate(&prompts, &params, &mut rngs, 0, None)
            .expect("generation")
    };
    let (want, got) = (run(&cpu), run(&gpu));
    for (row, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g.ids, w.ids, "row {row}: CUDA chose other tokens");
        for (a, b) in g.logprobs.iter().zip(&w.logprobs) {
            assert!(
                (a - b).abs() < 1e-4,
                "row {row}: logprob {a} on CUDA, {b} on the CPU"
            );
        }
    }
}

/// The largest KL divergence `KL(p || q)` over the positions of two `[B, T, V]` logit tensors.
fn max_kl(p_logits: &Tensor, q_logits: &Tensor) -> f64 {
    let lp = p_logits.to(Device::Cpu).log_softmax(-1, Kind::Float);
    let lq = q_logits.to(Device::Cpu).log_softmax(-1, Kind::Float);
    (lp.exp() * (&lp - &lq))
        .sum_dim_intlist(-1, false, Kind::Float)
        .max()
        .double_value(&[])
}

#[test]
fn bf16_weights_on_cuda_round_no_worse_than_on_the_cpu() {
    let Some(device) = cuda() else { return };
    let ((cpu_vs, mut cpu), (gpu_vs, mut gpu)) = twin_llamas(3, device);
    let want = tch::no_grad(|| cpu.logits(&ids()));
    cpu.set_dtype(&cpu_vs, Dtype::Bf16);
    gpu.set_dtype(&gpu_vs, Dtype::Bf16);
    assert!(
        gpu_vs
            .variables()
            .values()
            .all(|v| v.kind() == Kind::BFloat16 && v.device() == device)
    );
    let on_cpu = tch::no_grad(|| cpu.logits(&ids()));
    let on_gpu = tch::no_grad(|| gpu.logits(&ids().to(device)));
    assert_eq!(
        on_gpu.kind(),
        Kind::Float,
        "logits stay f32 on a bf16 model"
    );
    // bf16 rounding moves the distributions; the GPU's kernels may round differently from the
    // CPU's, but not by more than twice as much (the bound the parity tests hold transformers
    // to).
    let (kl_cpu, kl_gpu) = (max_kl(&want, &on_cpu), max_kl(&want, &on_gpu));
    assert!(
        kl_gpu <= 2.0 * kl_cpu + 1e-4,
        "bf16 moves next-token distributions by KL {kl_gpu} on CUDA, {kl_cpu} on the CPU"
    );
    let gens = gpu
        .generate(
            &[vec![2u32, 4, 8]],
            &[SamplingParams::greedy(8)],
            &mut [SeededRng::new(0)],
            0,
            None,
        )
        .expect("bf16 generation on CUDA");
    assert_eq!(gens[0].ids.len(), 8);
    assert!(gens[0].logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
}

/// One trainable weight `w` (and an f32 bias `b`) in a VarStore on `device`, `w` in `kind`.
fn weights(device: Device, kind: Kind) -> (nn::VarStore, Tensor, Tensor) {
    let vs = nn::VarStore::new(device);
    let start: Vec<f32> = (0..4096)
        .map(|i| 0.05 + 1e-3 * ((i * 37 % 101) as f32 - 50.0))
        .collect();
    let w = vs
        .root()
        .var_copy("w", &Tensor::from_slice(&start).to(device));
    let b = vs
        .root()
        .var_copy("b", &Tensor::from_slice(&[0.5f32, -0.5]).to(device));
    let mut w = w;
    if kind != Kind::Float {
        let data = w.to_kind(kind);
        w.set_data(&data);
    }
    (vs, w, b)
}

/// Five AdamW steps (lr 1e-5, weight decay 0.01) with the same fixed gradients; returns `w`
/// and the optimiser's fp32 master copy of it (the weight itself when it is f32).
fn five_steps(device: Device, kind: Kind, fused: bool) -> (Tensor, Tensor) {
    let (vs, w, b) = weights(device, kind);
    let mut opt = AdamW::new(&vs, 1e-5, 0.01).with_fused(fused);
    for step in 0..5 {
        opt.zero_grad();
        let g: Vec<f32> = (0..4096)
            .map(|i| (((i + step) * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        let g = Tensor::from_slice(&g).to(device).to_kind(w.kind());
        ((&w * g).sum(Kind::Float) + b.sum(Kind::Float)).backward();
        let taken = opt.clip_and_step(1e9, "cuda test", 0.0);
        assert!(!taken.skipped_non_finite);
    }
    let master = opt
        .state_tensors()
        .into_iter()
        .find(|(name, _)| name == "master.w")
        .map(|(_, t)| t)
        .unwrap_or_else(|| w.detach().copy());
    (w.detach().to(Device::Cpu), master.to(Device::Cpu))
}

#[test]
fn adamw_with_bf16_master_weights_steps_on_cuda_as_on_the_cpu() {
    let Some(device) = cuda() else { return };
    // The CPU's tensor-operation step is the one a GPU takes; the fused one computes the same.
    let (cpu_w, cpu_master) = five_steps(Device::Cpu, Kind::BFloat16, false);
    let (gpu_w, gpu_master) = five_steps(device, Kind::BFloat16, true);
    assert_eq!(gpu_w.kind(), Kind::BFloat16);
    assert_eq!(gpu_master.kind(), Kind::Float);
    let master_diff = max_diff(&gpu_master, &cpu_master);
    assert!(
        master_diff < 1e-6,
        "fp32 master weights differ by {master_diff}"
    );
    // Stochastic rounding hashes the element index, step and parameter: the same bf16 weight
    // on both devices, except where the masters differ in the last bit at a rounding edge.
    let same = gpu_w
        .eq_tensor(&cpu_w)
        .to_kind(Kind::Float)
        .mean(Kind::Float)
        .double_value(&[]);
    assert!(
        same > 0.999,
        "only {same:.4} of the bf16 weights agree with the CPU's"
    );
    // And the small steps (5e-5 in all, a fifth of a bf16 spacing) move the bf16 weights as
    // f32 does, in expectation over the rounding: projected on each element's f32 direction.
    let (f32_w, _) = five_steps(device, Kind::Float, true);
    let start = weights(Device::Cpu, Kind::Float).1;
    let f32_move = &f32_w - &start;
    let bf16_move = gpu_w.to_kind(Kind::Float) - start.to_kind(Kind::BFloat16).to_kind(Kind::Float);
    let along = |m: &Tensor| (m * f32_move.sign()).mean(Kind::Float).double_value(&[]);
    let (want, got) = (along(&f32_move), along(&bf16_move));
    assert!(want > 1e-5, "f32 weights did not move: {want:e}");
    assert!(
        (got - want).abs() < 0.2 * want,
        "bf16 weights moved {got:e} along the f32 step, where f32 moved {want:e}"
    );
}
