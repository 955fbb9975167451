//! Policy benchmarks: chat rendering/parsing, sampling one token from a 49,152-id vocabulary,
//! batched KV-cache generation of the demo model (with and without stop strings), and of a
//! small random Llama in f32 and bf16.

use agentrl_core::{Message, SamplingParams, SeededRng, ToolCall};
use std::sync::Arc;

use agentrl_policy::llama::{Dtype, Llama, LlamaConfig};
use agentrl_policy::{ByteTokenizer, ChatFormat, GptConfig, TinyChatFormat, TinyGpt};
use agentrl_policy::{Detokenizer, PolicyModel, sample_token};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tch::{Device, nn};

fn chat(c: &mut Criterion) {
    let fmt = TinyChatFormat::new();
    let call = ToolCall::new(
        "call_0_0",
        "calculator",
        &serde_json::json!({"expression": "47*83+29"}),
    );
    let action = Message::assistant_tool_calls(None, vec![call]);
    let generated = fmt.render_assistant(&action);
    let conversation = vec![
        Message::user("Compute 47*83+29"),
        action,
        Message::tool("call_0_0", "3930"),
    ];
    let mut g = c.benchmark_group("chat");
    g.throughput(Throughput::Elements(1));
    g.bench_function("render_prompt_3_messages", |b| {
        b.iter(|| fmt.render_prompt(&conversation, &[]))
    });
    g.bench_function("parse_tool_call", |b| {
        b.iter(|| fmt.parse_assistant(&generated, "call_0_"))
    });
    g.finish();
}

/// One token from a row of 49,152 logits (SmolLM2's vocabulary) at temperature 1: unfiltered,
/// top-p 0.9 and 0.95, top-k 50. `peaked`: 50 likely ids hold about 98% of the mass, as
/// at most positions of a trained model; `flat`: the long tail holds most of it, so top-p's
/// nucleus is thousands of ids (the worst case for finding it).
fn sampling(c: &mut Criterion) {
    let noise = |i: usize| ((i as f32 * 12.9898).sin() * 43_758.547).fract().abs();
    let profile = |tail_low: f32, tail_high: f32| -> Vec<f32> {
        (0..49_152)
            .map(|i| match i % 983 {
                0 => 8.0 + noise(i),
                _ => tail_low + (tail_high - tail_low) * noise(i),
            })
            .collect()
    };
    let profiles = [("peaked", profile(-12.0, 0.0)), ("flat", profile(0.0, 4.0))];
    let mut g = c.benchmark_group("sampling");
    g.throughput(Throughput::Elements(1));
    let settings = [
        ("unfiltered", 1.0, 0),
        ("top_p_0.9", 0.9, 0),
        ("top_p_0.95", 0.95, 0),
        ("top_k_50", 1.0, 50),
    ];
    for (profile, logits) in &profiles {
        for (name, top_p, top_k) in settings {
            let params = SamplingParams {
                top_p,
                top_k,
                ..Default::default()
            };
            let mut rng = SeededRng::new(0);
            g.bench_function(format!("vocab_49152_{profile}_{name}"), |b| {
                b.iter(|| sample_token(logits, &params, &mut rng))
            });
        }
    }
    g.finish();
}

fn generation(c: &mut Criterion) {
    tch::set_num_threads(1);
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = GptConfig {
        vocab_size: ByteTokenizer::VOCAB_SIZE,
        d_model: 96,
        n_layers: 3,
        n_heads: 4,
        max_seq_len: 160,
        ffn_mult: 4,
        rope_theta: 10_000.0,
    };
    let model = TinyGpt::new(&vs.root(), cfg).expect("valid config");
    let fmt = TinyChatFormat::new();
    let batch = 64;
    let new_tokens = 32;
    let prompts: Vec<Vec<u32>> = (0..batch)
        .map(|i| {
            fmt.render_prompt(
                &[Message::user(format!(
                    "Compute {}*{}+{}",
                    10 + i,
                    99 - i,
                    i
                ))],
                &[],
            )
        })
        .collect();
    let params = vec![
        SamplingParams {
            max_new_tokens: new_tokens,
            ..Default::default()
        };
        batch
    ];
    let mut g = c.benchmark_group("generate");
    g.sample_size(10);
    g.throughput(Throughput::Elements((batch * new_tokens) as u64));
    g.bench_function("tiny_gpt_batch64_32_tokens", |b| {
        b.iter(|| {
            let mut rngs: Vec<SeededRng> = (0..batch as u64).map(SeededRng::new).collect();
            model
                .generate(&prompts, &params, &mut rngs, 0, None)
                .expect("generation")
        })
    });
    // The same with two stop strings that never match: the cost of decoding and searching
    // every row's text after every token.
    let detokenizer: Detokenizer = Arc::new(move |ids| fmt.decode(ids));
    let with_stops: Vec<SamplingParams> = params
        .iter()
        .map(|p| SamplingParams {
            stop: vec!["</never>".into(), "<|never|>".into()],
            ..p.clone()
        })
        .collect();
    g.bench_function("tiny_gpt_batch64_32_tokens_2_stop_strings", |b| {
        b.iter(|| {
            let mut rngs: Vec<SeededRng> = (0..batch as u64).map(SeededRng::new).collect();
            model
                .generate(&prompts, &with_stops, &mut rngs, 0, Some(&detokenizer))
                .expect("generation")
        })
    });
    g.finish();
}

/// A small random Llama (GQA, 4 layers, 256 wide, 8k vocabulary): batch 16, 32 new tokens,
/// weights in f32 and in bf16.
fn llama_generation(c: &mut Criterion) {
    tch::set_num_threads(1);
    let config = LlamaConfig::from_json_str(
        r#"{"model_type": "llama", "hidden_size": 256, "intermediate_size": 704,
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 8192,
        "max_position_embeddings": 256, "tie_word_embeddings": true, "hidden_act": "silu"}"#,
        "bench",
    )
    .expect("valid config");
    let batch = 16;
    let new_tokens = 32;
    let prompts: Vec<Vec<u32>> = (0..batch as u32)
        .map(|i| (0..48).map(|j| (i * 131 + j * 17) % 8192).collect())
        .collect();
    let params = vec![SamplingParams::greedy(new_tokens); batch];
    let mut g = c.benchmark_group("generate");
    g.sample_size(10);
    g.throughput(Throughput::Elements((batch * new_tokens) as u64));
    for dtype in [Dtype::F32, Dtype::Bf16] {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(Device::Cpu);
        let mut model = Llama::new(&vs.root(), config.clone()).expect("valid config");
        model.set_dtype(&vs, dtype);
        g.bench_function(format!("llama_256x4_batch16_32_tokens_{dtype}"), |b| {
            b.iter(|| {
                let mut rngs: Vec<SeededRng> = (0..batch as u64).map(SeededRng::new).collect();
                model
                    .generate(&prompts, &params, &mut rngs, 0, None)
                    .expect("generation")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, chat, sampling, generation, llama_generation);
criterion_main!(benches);
