//! Benchmarks: exact evaluation of a typical expression, and a full calculator dispatch.

use std::hint::black_box;

use agentrl_core::{ToolCall, ToolContext};
use agentrl_tools::{Calculator, ToolBox, ToolLimits, evaluate};
use criterion::{Criterion, criterion_group, criterion_main};

const EXPR: &str = "(97 * 105 - 4) / 3 + -2.5 * (7 - 11)";

fn bench_evaluate(c: &mut Criterion) {
    c.bench_function("evaluate", |b| b.iter(|| evaluate(black_box(EXPR))));
}

fn bench_dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let toolbox = ToolBox::new(ToolLimits::default())
        .with(Calculator)
        .expect("register calculator");
    let call = ToolCall::new(
        "call_1",
        "calculator",
        &serde_json::json!({ "expression": EXPR }),
    );
    let ctx = ToolContext::default();
    c.bench_function("dispatch_calculator", |b| {
        b.iter(|| rt.block_on(toolbox.dispatch(black_box(&call), &ctx)))
    });
}

criterion_group!(benches, bench_evaluate, bench_dispatch);
criterion_main!(benches);
