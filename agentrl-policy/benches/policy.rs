//! Policy benchmarks: chat rendering/parsing and batched KV-cache generation of the demo model.

use agentrl_core::{Message, SamplingParams, SeededRng, ToolCall};
use agentrl_policy::PolicyModel;
use agentrl_policy::{ByteTokenizer, ChatFormat, GptConfig, TinyChatFormat, TinyGpt};
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
    g.finish();
}

criterion_group!(benches, chat, generation);
criterion_main!(benches);
