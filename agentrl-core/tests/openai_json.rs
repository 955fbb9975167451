//! Round trips of real OpenAI chat JSON through the core types.

use agentrl_core::*;
use serde_json::{Value, json};

#[test]
fn assistant_tool_call_message_round_trips() {
    let raw = r#"{
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": "call_abc123",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}
        }]
    }"#;
    let msg: Message = serde_json::from_str(raw).unwrap();
    assert_eq!(msg.role, Role::Assistant);
    assert_eq!(msg.content, None);
    let call = &msg.tool_calls[0];
    assert_eq!(call.kind, "function");
    assert_eq!(call.function.name, "get_weather");
    let args = call.function.parse_arguments().unwrap();
    assert_eq!(args["location"], "Paris");
    let back: Value = serde_json::to_value(&msg).unwrap();
    assert_eq!(back, serde_json::from_str::<Value>(raw).unwrap());
}

#[test]
fn tool_message_round_trips() {
    let raw = json!({"role": "tool", "tool_call_id": "call_abc123", "content": "{\"temp\": 21}"});
    let msg: Message = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(msg.role, Role::Tool);
    assert_eq!(msg.tool_call_id.as_deref(), Some("call_abc123"));
    assert_eq!(serde_json::to_value(&msg).unwrap(), raw);
}

#[test]
fn user_and_system_messages_round_trip() {
    for raw in [
        json!({"role": "system", "content": "You are helpful."}),
        json!({"role": "user", "content": "What is 2+2?", "name": "alice"}),
    ] {
        let msg: Message = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&msg).unwrap(), raw);
    }
}

#[test]
fn tool_spec_round_trips() {
    let raw = json!({
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluates arithmetic.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
        }
    });
    let spec: ToolSpec = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(spec.name(), "calculator");
    assert_eq!(serde_json::to_value(&spec).unwrap(), raw);
}

#[test]
fn malformed_arguments_give_a_clear_error() {
    let call = ToolCall {
        id: "c".into(),
        kind: "function".into(),
        function: FunctionCall {
            name: "calculator".into(),
            arguments: "{\"expression\": ".into(),
        },
    };
    let err = call.function.parse_arguments().unwrap_err();
    assert!(
        err.contains("calculator") && err.contains("not valid JSON"),
        "{err}"
    );
}

fn sample_trajectory() -> Trajectory {
    Trajectory::new("arith-calc", "t1", Split::Train, 7)
        .with_messages(vec![Message::user("2+2?"), Message::assistant("4")])
        .with_turns(vec![
            Turn {
                injected_ids: vec![1, 2, 3],
                generated_ids: vec![4, 5],
                logprobs: vec![-0.1, -0.2],
                policy_version: 3,
                policy_name: None,
                finish: FinishReason::Stop,
                reward: 0.0,
                stale: false,
                invalid_action: None,
            },
            Turn {
                injected_ids: vec![6],
                generated_ids: vec![7],
                logprobs: vec![-0.3],
                policy_version: 4,
                policy_name: Some("b".into()),
                finish: FinishReason::Stop,
                reward: 1.0,
                stale: false,
                invalid_action: None,
            },
        ])
        .with_success(true)
        .with_reward(1.0)
}

#[test]
fn trajectory_tokens_mask_and_logprobs_align() {
    let t = sample_trajectory();
    assert_eq!(t.token_ids(), vec![1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(t.loss_mask(), vec![0., 0., 0., 1., 1., 0., 1.]);
    assert_eq!(
        t.sampling_logprobs(),
        vec![0., 0., 0., -0.1, -0.2, 0., -0.3]
    );
    assert_eq!(t.min_policy_version(), 3);
    assert_eq!(t.final_answer(), Some("4"));
}

#[test]
fn jsonl_reports_broken_lines_and_keeps_the_rest() {
    let dir = std::env::temp_dir().join(format!("agentrl-core-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.jsonl");
    let t = sample_trajectory();
    write_jsonl(&path, std::slice::from_ref(&t), false).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map(|mut f| {
            use std::io::Write;
            writeln!(f, "{{not json").unwrap();
        })
        .unwrap();
    write_jsonl(&path, std::slice::from_ref(&t), true).unwrap();
    let (good, bad) = read_jsonl(&path).unwrap();
    assert_eq!(good, vec![t.clone(), t]);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].line, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn seeded_rng_is_stable() {
    let mut a = SeededRng::from_parts(&[1, 2]);
    let mut b = SeededRng::from_parts(&[1, 2]);
    let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
    let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
    assert_eq!(xs, ys);
    let mut c = SeededRng::from_parts(&[1, 3]);
    assert_ne!(xs[0], c.next_u64());
    for _ in 0..1000 {
        let v = a.range(-3, 3);
        assert!((-3..=3).contains(&v));
    }
}

#[test]
fn sampling_params_are_validated() {
    assert!(SamplingParams::default().validate().is_ok());
    let bad = SamplingParams {
        top_p: 0.0,
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().to_string().contains("top_p"));
}
