//! `agentrl serve` over real HTTP on 127.0.0.1: `HttpPolicy` (both API flavours) is token-exact
//! against the same `TchPolicy` called directly; chat completions return OpenAI `tool_calls`;
//! weight reloads change outputs and the version; bad requests are OpenAI-shaped 400s; a tiny
//! random Llama (GGUF) is served token-exactly (in f32 and bf16) and reloads, also from a pushed
//! PEFT adapter; stop strings cut the text; and the stock Python `openai` client works against it
//! (skipped when the package is missing). The `agentrl serve` command itself and rollouts over
//! served policies are tested in `agentrl-trainer` (they need its binary and rollouts).

use std::sync::Arc;

use agentrl_core::{FinishReason, Generation, GenerationRequest, Message, Policy, SamplingParams};
use agentrl_policy::hf::HfChatFormat;
use agentrl_policy::llama::{Dtype, LoraConfig, save_adapters};
use agentrl_policy::load::{load_llama, load_llama_chat, load_tiny};
use agentrl_policy::serve::logprobs::logprobs;
use agentrl_policy::serve::{ServeState, ServedModel};
use agentrl_policy::{
    ApiFlavor, ChatFormat, HttpPolicy, HttpPolicyConfig, TchPolicy, TinyChatFormat,
};
use serde_json::{Value, json};
use tch::Device;

#[path = "support/tiny_chat_gguf.rs"]
mod tiny_chat_gguf;
#[path = "support/tool_model.rs"]
mod tool_model;

use tool_model::{CONTEXT, calculator, serve_on_loopback, tool_models};

/// Serves the checkpoint `path` (shape from the run's config.toml) on 127.0.0.1:0.
async fn start(path: &std::path::Path) -> (String, Arc<ServeState>) {
    start_in(path, Dtype::F32).await
}

/// Serves `path` with weights in `dtype` on 127.0.0.1:0.
async fn start_in(path: &std::path::Path, dtype: Dtype) -> (String, Arc<ServeState>) {
    let model =
        ServedModel::load(path, None, Some("tiny".into()), Device::Cpu, dtype, 16, 0).unwrap();
    serve_on_loopback(model, None).await
}

fn http(base: &str, flavor: ApiFlavor, name: Option<&str>) -> HttpPolicy {
    let mut c = HttpPolicyConfig::new(base, "tiny");
    c.flavor = flavor;
    c.name = name.map(String::from);
    HttpPolicy::new(c).unwrap()
}

fn direct(path: &std::path::Path) -> TchPolicy {
    let (vs, model) = load_tiny(path, None, Device::Cpu).unwrap();
    TchPolicy::spawn(vs, model, 16, 0).unwrap()
}

fn param_sets(stops: Vec<u32>) -> Vec<SamplingParams> {
    let mut greedy = SamplingParams::greedy(24);
    greedy.stop_ids = stops.clone();
    let seeded = SamplingParams {
        temperature: 1.0,
        max_new_tokens: 24,
        stop_ids: stops.clone(),
        seed: Some(42),
        ..SamplingParams::default()
    };
    let nucleus = SamplingParams {
        temperature: 0.8,
        top_p: 0.9,
        top_k: 20,
        max_new_tokens: 24,
        stop_ids: stops,
        seed: Some(7),
        ..SamplingParams::default()
    };
    vec![greedy, seeded, nucleus]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_policy_is_token_exact_against_the_same_tch_policy() {
    let f = tool_models();
    let (base, _state) = start(&f.tool).await;
    let local = direct(&f.tool);
    let fmt = TinyChatFormat::new();
    let prompts = vec![
        fmt.render_prompt(&[Message::user("Compute 6*7")], &[calculator()]),
        fmt.render_prompt(&[Message::user("Compute 12+30")], &[]),
    ];
    for flavor in [ApiFlavor::OpenAiCompletions, ApiFlavor::SglangGenerate] {
        let remote = http(&base, flavor, None);
        for params in param_sets(fmt.stop_ids()) {
            for prompt in &prompts {
                let req = GenerationRequest::new(prompt.clone(), params.clone());
                let want = one(&local, &req).await;
                let got = one(&remote, &req).await;
                assert!(!want.ids.is_empty());
                assert_eq!(got.ids, want.ids, "{flavor:?} {params:?}");
                assert_eq!(got.logprobs, want.logprobs, "{flavor:?} {params:?}");
                assert_eq!(got.finish, want.finish);
                assert_eq!(got.policy_version, 0);
            }
        }
    }
    // Concurrent requests (batched together on the server) give the same ids.
    let remote = http(&base, ApiFlavor::OpenAiCompletions, None);
    let reqs: Vec<GenerationRequest> = (0..8u64)
        .map(|i| {
            let mut p = param_sets(fmt.stop_ids())[1].clone();
            p.seed = Some(i);
            GenerationRequest::new(prompts[(i % 2) as usize].clone(), p)
        })
        .collect();
    let together = remote.generate(reqs.clone()).await.unwrap();
    for (req, got) in reqs.into_iter().zip(together) {
        let want = one(&local, &req).await;
        assert_eq!(got.ids, want.ids);
        for (a, b) in got.logprobs.iter().zip(&want.logprobs) {
            assert!((a - b).abs() < 1e-3, "{a} vs {b}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_returns_tool_calls_and_weight_reloads_change_outputs_and_version() {
    let f = tool_models();
    let (base, state) = start(&f.random).await;
    let remote = http(&base, ApiFlavor::OpenAiCompletions, None);
    let messages = [Message::user("Compute 6*7")];
    let greedy = SamplingParams::greedy(40);
    let before = remote
        .chat(&messages, &[calculator()], &greedy)
        .await
        .unwrap();
    assert_eq!(before.policy_version, Some(0));

    for bad in [
        &f.wrong_shape,
        &f.random.with_file_name("missing.safetensors"),
    ] {
        let err = remote
            .post_json("/v1/load_weights", &json!({ "path": bad }))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HTTP 400") && err.contains("loading weights"),
            "{err}"
        );
    }
    assert_eq!(state.model.policy.version(), 0);

    let loaded = remote
        .post_json("/v1/load_weights", &json!({ "path": f.tool }))
        .await
        .unwrap();
    assert_eq!(loaded["policy_version"], 1);
    let after = remote
        .chat(&messages, &[calculator()], &greedy)
        .await
        .unwrap();
    assert_eq!(after.policy_version, Some(1));
    assert_ne!(after.message, before.message);
    assert_eq!(after.finish_reason, "tool_calls");
    let call = &after.message.tool_calls[0];
    assert_eq!(call.function.name, "calculator");
    assert_eq!(
        call.function.parse_arguments().unwrap(),
        json!({"expression": "6*7"})
    );

    let fmt = TinyChatFormat::new();
    let prompt = fmt.render_prompt(&messages, &[calculator()]);
    let g = remote
        .generate(vec![GenerationRequest::new(
            prompt,
            param_sets(fmt.stop_ids())[0].clone(),
        )])
        .await
        .unwrap();
    assert_eq!(g[0].policy_version, 1);
    assert_eq!(remote.version(), 1);
    let explicit = remote
        .post_json(
            "/v1/load_weights",
            &json!({ "path": f.random, "version": 9 }),
        )
        .await
        .unwrap();
    assert_eq!(explicit["policy_version"], 9);
    let back = remote
        .chat(&messages, &[calculator()], &greedy)
        .await
        .unwrap();
    assert_eq!(back.policy_version, Some(9));
    assert_eq!(back.message.content, before.message.content);
    let functions =
        |m: &Message| -> Vec<_> { m.tool_calls.iter().map(|c| c.function.clone()).collect() };
    assert_eq!(functions(&back.message), functions(&before.message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_strings_cut_the_text_and_keep_the_completing_token() {
    let f = tool_models();
    let (base, _state) = start(&f.tool).await;
    let fmt = TinyChatFormat::new();
    let (vs, model) = load_tiny(&f.tool, None, Device::Cpu).unwrap();
    let local =
        TchPolicy::spawn_with_detokenizer(vs, model, 16, 0, Arc::new(move |ids| fmt.decode(ids)))
            .unwrap();
    let prompt = fmt.render_prompt(&[Message::user("Compute 6*7")], &[calculator()]);
    let mut params = param_sets(fmt.stop_ids())[0].clone();
    params.max_new_tokens = 60;
    let full = local
        .generate(vec![GenerationRequest::new(prompt.clone(), params.clone())])
        .await
        .unwrap()
        .remove(0);
    let full_text = fmt.decode(&full.ids);
    assert!(full_text.contains("\"6*7\""), "{full_text}");
    let stop = "\"6*";
    params.stop = vec![stop.to_string()];
    let req = GenerationRequest::new(prompt.clone(), params);
    let want = one(&local, &req).await;
    assert_eq!(want.finish, FinishReason::Stop);
    assert_eq!(want.matched_stop.as_deref(), Some(stop));
    assert!(want.ids.len() < full.ids.len());
    assert!(
        fmt.decode(&want.ids).ends_with(stop),
        "the token that completes it is kept"
    );
    for flavor in [ApiFlavor::OpenAiCompletions, ApiFlavor::SglangGenerate] {
        let got = http(&base, flavor, None)
            .generate(vec![req.clone()])
            .await
            .unwrap()
            .remove(0);
        assert_eq!(got.ids, want.ids, "{flavor:?}");
        assert_eq!(got.finish, FinishReason::Stop);
        assert_eq!(got.matched_stop.as_deref(), Some(stop), "{flavor:?}");
    }
    // The OpenAI text is cut before the stop string; the ids and `stop_reason` tell the rest.
    let before_stop = &full_text[..full_text.find(stop).unwrap()];
    let body = json!({"prompt": prompt, "max_tokens": 60, "stop": stop});
    let answer = post_ok(&base, "/v1/completions", &body).await;
    let choice = &answer["choices"][0];
    assert_eq!(choice["text"], before_stop);
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["stop_reason"], stop);
    assert_eq!(choice["token_ids"], json!(want.ids));
    let body = json!({"input_ids": prompt, "sampling_params":
                      {"max_new_tokens": 60, "temperature": 0, "stop": [stop]}});
    let answer = post_ok(&base, "/generate", &body).await;
    assert_eq!(answer["text"], before_stop);
    assert_eq!(answer["meta_info"]["finish_reason"]["matched"], stop);
    // Chat: the message stops at the string too; tool calls are parsed from the ids, so a call
    // cut by a stop string comes back with a parse error saying so.
    let body = json!({"messages": [{"role": "user", "content": "Compute 6*7"}],
                      "tools": [calculator()],
                      "temperature": 0, "stop": ["expression"]});
    let answer = post_ok(&base, "/v1/chat/completions", &body).await;
    let choice = &answer["choices"][0];
    assert_eq!(choice["stop_reason"], "expression", "{answer}");
    let parse_error = choice["parse_error"].as_str().unwrap();
    assert!(parse_error.contains("tool call without"), "{parse_error}");
    let ids: Vec<u32> = serde_json::from_value(choice["token_ids"].clone()).unwrap();
    assert!(fmt.decode(&ids).ends_with("expression"));
}

/// The generation of `policy` for the single request `req`.
async fn one(policy: &impl Policy, req: &GenerationRequest) -> Generation {
    policy.generate(vec![req.clone()]).await.unwrap().remove(0)
}

/// The `data:` payloads of a server-sent-event answer to `body` on `route`, as JSON (the final
/// `[DONE]` checked and left out).
async fn post_stream(base: &str, route: &str, body: &Value) -> Vec<Value> {
    let response = reqwest::Client::new()
        .post(format!("{base}{route}"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answers_add_up_to_the_whole_ones() {
    let f = tool_models();
    let (base, _state) = start(&f.tool).await;
    let fmt = TinyChatFormat::new();
    let prompt = fmt.render_prompt(&[Message::user("Compute 6*7")], &[calculator()]);
    for stop in [json!(null), json!("*7"), json!(["never", "\"6"])] {
        let body = json!({"prompt": prompt, "max_tokens": 40, "temperature": 0, "stop": stop});
        let whole = post_ok(&base, "/v1/completions", &body).await;
        let mut streamed_body = body.clone();
        streamed_body["stream"] = json!(true);
        let chunks = post_stream(&base, "/v1/completions", &streamed_body).await;
        let text: String = chunks
            .iter()
            .map(|c| c["choices"][0]["text"].as_str().unwrap())
            .collect();
        let ids: Vec<Value> = chunks
            .iter()
            .flat_map(|c| c["choices"][0]["token_ids"].as_array().unwrap().clone())
            .collect();
        let choice = &whole["choices"][0];
        assert_eq!(text, choice["text"].as_str().unwrap(), "stop {stop}");
        assert_eq!(Value::Array(ids), choice["token_ids"], "stop {stop}");
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], choice["finish_reason"]);
        assert_eq!(last["choices"][0]["stop_reason"], choice["stop_reason"]);
        assert_eq!(last["usage"], whole["usage"]);
        assert!(
            chunks[..chunks.len() - 1]
                .iter()
                .all(|c| c["choices"][0]["finish_reason"].is_null())
        );
    }
    // Chat without tools streams its content; the deltas add up to the whole message.
    let body = json!({"messages": [{"role": "user", "content": "Compute 12+30"}],
                      "temperature": 0, "max_tokens": 20});
    let whole = post_ok(&base, "/v1/chat/completions", &body).await;
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    let chunks = post_stream(&base, "/v1/chat/completions", &streamed_body).await;
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let want = whole["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(content, want);
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        whole["choices"][0]["finish_reason"]
    );
}

/// The JSON answer to `body` on `route`, which must be a 200.
async fn post_ok(base: &str, route: &str, body: &Value) -> Value {
    let (status, answer) = post_raw(base, route, &body.to_string()).await;
    assert_eq!(status, 200, "{route}: {answer}");
    answer
}

async fn post_raw(base: &str, route: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{route}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_openai_shaped_400s() {
    let (base, _state) = start(&tool_models().random).await;
    let long: Vec<u32> = vec![65; CONTEXT];
    let cases = [
        (
            "/v1/completions",
            "{not json".to_string(),
            "invalid request body",
        ),
        (
            "/v1/completions",
            json!({"prompt": long}).to_string(),
            "context",
        ),
        (
            "/v1/completions",
            json!({"prompt": [1, 99999]}).to_string(),
            "vocabulary",
        ),
        (
            "/v1/completions",
            json!({"prompt": ["a", "b"], "stream": true}).to_string(),
            "stream: streaming answers one prompt",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "stream": true, "logprobs": 1}).to_string(),
            "logprobs are not streamed",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "stop": ["x", 1]}).to_string(),
            "stop[1]: expected a string",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "stop": [""]}).to_string(),
            "stop[0]: empty",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "stop": vec!["x"; 17]}).to_string(),
            "at most 16",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}], "stop": {"a": 1}}).to_string(),
            "stop: expected a string or a list",
        ),
        (
            "/v1/completions",
            json!({"prompt": "hi", "temperature": -1}).to_string(),
            "temperature",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": "hi"}).to_string(),
            "invalid request body",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": []}).to_string(),
            "at least one",
        ),
        (
            "/generate",
            json!({"sampling_params": {}}).to_string(),
            "input_ids",
        ),
        (
            "/v1/load_weights",
            json!({"paths": "x"}).to_string(),
            "unknown field `paths`",
        ),
        (
            "/v1/load_weights",
            json!({"version": 3}).to_string(),
            "exactly one of `path` and `upload`",
        ),
    ];
    for (route, body, needle) in cases {
        let (status, answer) = post_raw(&base, route, &body).await;
        assert_eq!(status, 400, "{route} {body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{route}: {message}");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
    }
    // Any model name is served; text prompts work; n choices come back.
    let body = json!({"model": "whatever", "prompt": "Compute", "max_tokens": 3, "n": 2,
                      "logprobs": 0, "seed": 1, "ignore_eos": true});
    let answer = post_ok(&base, "/v1/completions", &body).await;
    assert_eq!(answer["choices"].as_array().unwrap().len(), 2);
    assert_eq!(
        answer["choices"][0]["token_ids"].as_array().unwrap().len(),
        3
    );
    assert_eq!(answer["usage"]["completion_tokens"], 6);
    let models = reqwest::get(format!("{base}/v1/models")).await.unwrap();
    let models: Value = models.json().await.unwrap();
    assert_eq!(models["data"][0]["id"], "tiny");
    assert_eq!(models["data"][0]["max_model_len"], CONTEXT);
}

const OPENAI_SCRIPT: &str = r#"
import json, sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
tools = [{"type": "function", "function": {"name": "calculator",
          "description": "Evaluates an arithmetic expression",
          "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                         "required": ["expression"]}}}]
chat = client.chat.completions.create(model="tiny", temperature=0, max_tokens=40, tools=tools,
    messages=[{"role": "user", "content": "Compute 6*7"}])
choice = chat.choices[0]
assert choice.finish_reason == "tool_calls", chat
call = choice.message.tool_calls[0]
assert call.type == "function" and call.function.name == "calculator", call
assert json.loads(call.function.arguments) == {"expression": "6*7"}, call
done = client.completions.create(model="tiny", prompt="Compute 6*7", max_tokens=5,
    temperature=0, logprobs=1, extra_body={"return_tokens_as_token_ids": True})
lp = done.choices[0].logprobs
assert len(lp.tokens) == len(lp.token_logprobs) == 5, lp
assert all(t.startswith("token_id:") for t in lp.tokens), lp
ids = client.completions.create(model="tiny", prompt=[60, 61, 62], max_tokens=2, temperature=0)
assert ids.choices[0].finish_reason in ("stop", "length")
assert [m.id for m in client.models.list().data] == ["tiny"]
# Streaming: the deltas add up to the non-streamed answers.
whole = client.completions.create(model="tiny", prompt="Compute 6*7", max_tokens=30,
    temperature=0, stop=["}"])
parts = list(client.completions.create(model="tiny", prompt="Compute 6*7", max_tokens=30,
    temperature=0, stop=["}"], stream=True))
assert "".join(p.choices[0].text for p in parts) == whole.choices[0].text, parts
assert parts[-1].choices[0].finish_reason == whole.choices[0].finish_reason == "stop"
stream = client.chat.completions.create(model="tiny", temperature=0, max_tokens=40, tools=tools,
    messages=[{"role": "user", "content": "Compute 6*7"}], stream=True)
chunks = list(stream)
assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
assert chunks[-1].choices[0].finish_reason == "tool_calls", chunks[-1]
streamed = chunks[-1].choices[0].delta.tool_calls[0]
assert streamed.function.name == "calculator", streamed
assert json.loads(streamed.function.arguments) == {"expression": "6*7"}, streamed
print("openai client ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_openai_python_client_works() {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import openai"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!(
            "SKIPPED stock_openai_python_client_works: python3 with the `openai` package is missing (pip install openai)"
        );
        return;
    }
    let (base, _state) = start(&tool_models().tool).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, OPENAI_SCRIPT).unwrap();
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(&base)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("openai client ok"), "{stdout}");
}

/// Writes a PEFT adapter (rank 4 on the attention projections, random `B`) for the model at
/// `base` into `dir`, and returns that model with the adapter merged, behind a policy thread.
fn write_adapter(base: &std::path::Path, dir: &std::path::Path) -> TchPolicy {
    let (vs, mut model) = load_llama(base, Device::Cpu, Dtype::F32).unwrap();
    let cfg = LoraConfig::new(4, 8.0);
    model.attach_lora(&vs, &cfg).unwrap();
    tch::no_grad(|| {
        for (name, mut v) in vs.variables() {
            if name.contains(".lora_B.") {
                v.copy_(&(tch::Tensor::randn_like(&v) * 0.5));
            }
        }
    });
    save_adapters(&vs, &cfg, dir, "base.gguf").unwrap();
    model.merge_lora();
    TchPolicy::spawn(vs, model, 16, 0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_lora_adapter_is_merged_into_the_served_base() {
    let dir = tempfile::tempdir().unwrap();
    let base = tiny_chat_gguf::write_tiny_model_named(dir.path(), "base.gguf", 31);
    let (url, _state) = start(&base).await;
    let remote = http(&url, ApiFlavor::OpenAiCompletions, None);
    let (base_local, format) = local(&base, Dtype::F32);
    let first = write_adapter(&base, &dir.path().join("adapter-1"));
    let second = write_adapter(&base, &dir.path().join("adapter-2"));
    let prompt = format.render_prompt(&[Message::user("hello the world")], &[]);
    let req = GenerationRequest::new(prompt, SamplingParams::greedy(12));
    let before = one(&remote, &req).await;
    let want = one(&base_local, &req).await;
    assert_eq!(before.logprobs, want.logprobs);
    for (version, (name, merged)) in [("adapter-1", &first), ("adapter-2", &second)]
        .into_iter()
        .enumerate()
    {
        let loaded = remote
            .post_json(
                "/v1/load_weights",
                &json!({ "path": dir.path().join(name) }),
            )
            .await
            .unwrap();
        assert_eq!(loaded["policy_version"], version as u64 + 1);
        let served = one(&remote, &req).await;
        let want = one(merged, &req).await;
        // Base + this adapter (the second is not stacked on the first).
        assert_eq!(
            (&served.ids, &served.logprobs),
            (&want.ids, &want.logprobs),
            "{name}"
        );
        assert_ne!(served.logprobs, before.logprobs, "{name} changed nothing");
    }
    // An adapter whose config names other targets than its tensors is refused, and the model
    // keeps serving the last good weights.
    let bad = dir.path().join("adapter-1");
    let config = bad.join("adapter_config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let mut peft: Value = serde_json::from_str(&text).unwrap();
    peft["target_modules"] = json!(["q_proj"]);
    std::fs::write(&config, peft.to_string()).unwrap();
    let err = remote
        .post_json("/v1/load_weights", &json!({ "path": bad }))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 400") && err.contains("other targets"),
        "{err}"
    );
    let served = one(&remote, &req).await;
    let want = one(&second, &req).await;
    assert_eq!(served.logprobs, want.logprobs);
}

/// A Llama GGUF loaded directly in `dtype`, behind its own policy thread.
fn local(path: &std::path::Path, dtype: Dtype) -> (TchPolicy, HfChatFormat) {
    let (vs, model, format) = load_llama_chat(path, Device::Cpu, dtype).unwrap();
    (TchPolicy::spawn(vs, model, 16, 0).unwrap(), format)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llama_gguf_is_served_in_bf16_and_reloads_into_bf16() {
    let dir = tempfile::tempdir().unwrap();
    let first = tiny_chat_gguf::write_tiny_model_named(dir.path(), "first.gguf", 21);
    let second = tiny_chat_gguf::write_tiny_model_named(dir.path(), "second.gguf", 22);
    let (base, _state) = start_in(&first, Dtype::Bf16).await;
    let remote = http(&base, ApiFlavor::OpenAiCompletions, None);
    let (first_bf16, format) = local(&first, Dtype::Bf16);
    let (second_bf16, _) = local(&second, Dtype::Bf16);
    let prompt = format.render_prompt(&[Message::user("hello the world")], &[]);
    let req = GenerationRequest::new(prompt, SamplingParams::greedy(12));
    let served = one(&remote, &req).await;
    let want = one(&first_bf16, &req).await;
    assert_eq!((&served.ids, &served.logprobs), (&want.ids, &want.logprobs));
    // bf16 is not f32: the f32 model's log-probabilities of the ids the bf16 server chose differ
    // from the served ones, a little. They are teacher-forced (the served ids scored by f32), not
    // compared against f32's own greedy choice, which a near-tie may send elsewhere.
    let (_vs, first_f32) = load_llama(&first, Device::Cpu, Dtype::F32).unwrap();
    let forced: Vec<i64> = req
        .prompt_ids
        .iter()
        .chain(&served.ids)
        .map(|&id| i64::from(id))
        .collect();
    let exact = logprobs(&first_f32, &forced).unwrap().logprobs;
    let exact = &exact[req.prompt_ids.len()..];
    assert_eq!(exact.len(), served.logprobs.len());
    let drift = exact
        .iter()
        .zip(&served.logprobs)
        .map(|(e, s)| (e.unwrap() - f64::from(*s)).abs())
        .fold(0.0, f64::max);
    assert!(
        drift > 0.0 && drift < 0.1,
        "bf16 vs f32 log-probability drift {drift}"
    );
    // New weights go into the bf16 model.
    let loaded = remote
        .post_json("/v1/load_weights", &json!({ "path": second }))
        .await
        .unwrap();
    assert_eq!(loaded["policy_version"], 1);
    let served = one(&remote, &req).await;
    let want = one(&second_bf16, &req).await;
    assert_eq!((served.ids, served.logprobs), (want.ids, want.logprobs));
    // AgentRL's tiny byte models are f32 only.
    let refused = ServedModel::load(
        &tool_models().random,
        None,
        None,
        Device::Cpu,
        Dtype::Bf16,
        4,
        0,
    );
    let err = refused.err().unwrap().to_string();
    assert!(err.contains("--dtype bf16"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llama_gguf_is_served_token_exactly_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let first = tiny_chat_gguf::write_tiny_model_named(dir.path(), "first.gguf", 17);
    let second = tiny_chat_gguf::write_tiny_model_named(dir.path(), "second.gguf", 99);
    let (base, state) = start(&first).await;
    assert_eq!(state.model.context_len, 128);
    let (first_local, format) = local(&first, Dtype::F32);
    let (second_local, _) = local(&second, Dtype::F32);
    let prompt = format.render_prompt(&[Message::user("hello the world")], &[]);
    let remote = http(&base, ApiFlavor::OpenAiCompletions, None);
    let check = async |want: &TchPolicy, version: u64| {
        for params in param_sets(format.stop_ids()) {
            let req = GenerationRequest::new(prompt.clone(), params);
            let w = one(want, &req).await;
            let g = one(&remote, &req).await;
            assert_eq!((g.ids, g.logprobs), (w.ids, w.logprobs));
            assert_eq!(g.policy_version, version);
        }
    };
    check(&first_local, 0).await;
    let reply = remote
        .chat(&[Message::user("hello")], &[], &SamplingParams::greedy(8))
        .await
        .unwrap();
    assert!(reply.message.content.is_some());
    let text = remote
        .post_json(
            "/v1/completions",
            &json!({"prompt": "hello the world", "max_tokens": 4, "ignore_eos": true}),
        )
        .await
        .unwrap();
    assert_eq!(text["choices"][0]["token_ids"].as_array().unwrap().len(), 4);
    let loaded = remote
        .post_json("/v1/load_weights", &json!({ "path": second }))
        .await
        .unwrap();
    assert_eq!(loaded["policy_version"], 1);
    check(&second_local, 1).await;
}

/// The server's engine stats as `/health` reports them.
async fn engine_health(base: &str) -> Value {
    let health: Value = reqwest::get(format!("{base}/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    health["engine"].clone()
}

/// Sticky sessions over HTTP get the engine's reuse: three turns of one conversation sent by
/// `HttpPolicy` with the session header (both flavours) equal a direct `TchPolicy` without
/// sessions, and the server reports the ids it reused on `/health`; ending the session frees
/// its cache. A bad header or session id is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_sent_over_http_reuse_the_servers_keys_and_values() {
    let f = tool_models();
    let fmt = TinyChatFormat::new();
    for flavor in [ApiFlavor::OpenAiCompletions, ApiFlavor::SglangGenerate] {
        let (base, state) = start(&f.tool).await;
        let mut config = HttpPolicyConfig::new(base.as_str(), "tiny");
        config.flavor = flavor;
        config.end_sessions = true;
        let remote = HttpPolicy::new(config).unwrap();
        let local = direct(&f.tool);
        let mut prompt = fmt.render_prompt(&[Message::user("Compute 2+3")], &[]);
        let reply = prompt[1..5].to_vec();
        let mut expected_reuse = 0;
        for turn in 0..3 {
            let params = SamplingParams::greedy(10);
            let request = GenerationRequest::new(prompt.clone(), params);
            let want = local.generate(vec![request.clone()]).await.unwrap();
            let got = remote
                .generate(vec![request.with_session("conversation-1")])
                .await
                .unwrap();
            assert_eq!(got[0].ids, want[0].ids, "{flavor:?} turn {turn}");
            if turn > 0 {
                expected_reuse += prompt.len() - reply.len() - 1;
            }
            prompt.extend(&got[0].ids);
            prompt.extend(&reply);
        }
        let engine = engine_health(&base).await;
        let reused = engine["reused_tokens"].as_u64().unwrap();
        assert_eq!(reused as usize, expected_reuse, "{flavor:?}: {engine}");
        assert_eq!(state.model.policy.stats().reused_tokens, reused);
        assert_eq!(engine["cached_sessions"], 1, "{engine}");
        // The end of the conversation reaches the server in the background.
        remote.end_session("conversation-1");
        let mut cached = Value::Null;
        for _ in 0..400 {
            cached = engine_health(&base).await["cached_sessions"].clone();
            if cached == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert_eq!(cached, 0, "{flavor:?}: the ended session is still cached");
    }
    let (base, _state) = start(&f.tool).await;
    let client = reqwest::Client::new();
    // An unknown session ends without complaint; an id with a space is refused.
    let ended = client
        .delete(format!("{base}/v1/sessions/never-started"))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    let refused = client
        .delete(format!("{base}/v1/sessions/two%20words"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert!(body.to_string().contains("/v1/sessions"), "{body}");
    let response = client
        .post(format!("{base}/v1/completions"))
        .header("x-session-id", "")
        .json(&json!({"prompt": [1, 2, 3], "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body.to_string().contains("x-session-id"), "{body}");
}
