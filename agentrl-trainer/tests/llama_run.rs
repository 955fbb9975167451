//! A whole run with a pretrained model: a tiny random Llama written here as a Hugging Face
//! directory (config, safetensors, byte-level `tokenizer.json`, `tokenizer_config.json`) is
//! trained with LoRA on `arith-calc` through `demo` (SFT, evaluation, GRPO, evaluation) using
//! the example's tool-calling chat template, and leaves a PEFT adapter; with a rollout server,
//! every step's adapter is pushed to it; `[model]`/`[lora]` configs are checked.

use std::path::{Path, PathBuf};

use agentrl_core::{Message, ToolCall};
use agentrl_policy::ChatFormat;
use agentrl_policy::llama::{Dtype, Llama, LlamaConfig, is_adapter_name};
use agentrl_policy::load::load_chat_format;
use agentrl_policy::serve::ServedModel;
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::run::{Run, demo};
use serde_json::json;
use tch::{Device, Kind, Tensor, nn};

mod common;

use common::tiny_vocab::byte_chars;

const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// A byte-level BPE without merges (one token per byte) plus ChatML specials after the bytes.
fn tokenizer_json() -> serde_json::Value {
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_chars().iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    let added: Vec<_> = SPECIALS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"id": 256 + i, "content": s, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                          "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": []}
    })
}

/// Writes a tiny random Llama as a Hugging Face directory, with a plain ChatML template.
fn write_model_dir(dir: &Path) {
    let config = json!({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 259,
        "max_position_embeddings": 2048, "tie_word_embeddings": true, "hidden_act": "silu"});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    tch::manual_seed(11);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = LlamaConfig::from_json_str(&config.to_string(), "tiny").unwrap();
    let _model = Llama::new(&vs.root(), cfg).unwrap();
    vs.save(dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json().to_string()).unwrap();
    let chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
        message['content'] + '<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}\
        {{ '<|im_start|>assistant\\n' }}{% endif %}";
    let tok_cfg = json!({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                         "chat_template": chatml});
    std::fs::write(dir.join("tokenizer_config.json"), tok_cfg.to_string()).unwrap();
}

/// The chat template of the example in `examples/NAME`.
fn example_template_of(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
        .join("chat_template.jinja")
}

fn run_config(model_dir: &Path, lora: &str) -> String {
    format!(
        r#"
seed = 5
device = "cpu"
[env]
id = "arith-calc"
[model]
pretrained = "{}"
chat_template = "{}"
max_seq_len = 1600
micro_batch = 2
{lora}
[sft]
demos = 24
steps = 4
batch_size = 4
lr = 1e-2
[sft.demonstrator]
tool_prob_two_operands = 1.0
tool_prob_three_operands = 1.0
copy_error_prob = 0.0
[rl]
steps = 2
tasks_per_step = 2
group_size = 2
lr = 1e-3
max_new_tokens = 8
[pipeline]
max_staleness = 1
max_batch = 16
[eval]
tasks = 3
max_new_tokens = 8
"#,
        model_dir.display(),
        example_template_of("smollm2-calc").display()
    )
}

#[test]
fn the_example_templates_render_and_parse_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    write_model_dir(dir.path());
    let calls = [
        ("calculator", json!({"expression": "47*83+29"}), "3930"),
        (
            "search",
            json!({"query": "\"Brinen Lathe\" invented", "limit": 2}),
            "Brinby",
        ),
        ("act", json!({"command": "put book in chest"}), "done"),
    ];
    for example in ["smollm2-calc", "smollm2-multitask"] {
        let source = std::fs::read_to_string(example_template_of(example)).unwrap();
        let format = load_chat_format(dir.path(), Some(&source)).unwrap();
        for (tool, arguments, answer) in &calls {
            let call = ToolCall::new("c0", *tool, arguments);
            let action = Message::assistant_tool_calls(None, vec![call]);
            let ids = format.render_assistant(&action);
            let text = format.decode(&ids);
            assert!(text.contains("<tool_call>"), "{example}: {text}");
            let parsed = format.parse_assistant(&ids, "c");
            assert_eq!(parsed.error, None, "{example}: {text}");
            assert_eq!(parsed.message.tool_calls.len(), 1, "{example}");
            assert_eq!(parsed.message.tool_calls[0].function.name, *tool);
            let args: serde_json::Value =
                serde_json::from_str(&parsed.message.tool_calls[0].function.arguments).unwrap();
            assert_eq!(&args, arguments, "{example}");
            let reply = format.render_assistant(&Message::assistant(*answer));
            let parsed = format.parse_assistant(&reply, "c");
            assert_eq!(
                parsed.message.content.as_deref(),
                Some(*answer),
                "{example}"
            );
            assert!(parsed.message.tool_calls.is_empty(), "{example}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pretrained_model_trains_with_lora_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    write_model_dir(&model_dir);
    // bf16 base weights, f32 adapters, and a stop string that ends a turn after a tool call.
    let lora = "dtype = \"bf16\"\nstop = [\"</tool_call>\"]\n\
                [lora]\nr = 4\nalpha = 8.0\ntargets = [\"q_proj\", \"v_proj\", \"up_proj\"]";
    let cfg = RunConfig::from_toml_str(&run_config(&model_dir, lora), "test").unwrap();
    assert_eq!(cfg.model.pretrained().map(|p| p.dtype), Some(Dtype::Bf16));
    let run_dir = dir.path().join("run");
    let summary = demo(cfg, &run_dir).await.unwrap();
    assert_eq!(summary.rl_steps, 2);
    assert_eq!(summary.eval_tasks, 3);

    // SFT and both RL steps were logged.
    let metrics = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    let sft: Vec<f64> = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "sft_step")
        .map(|r| r["loss"].as_f64().unwrap())
        .collect();
    assert!(!sft.is_empty() && sft.iter().all(|l| l.is_finite()));
    let rl = metrics
        .lines()
        .filter(|l| l.contains("\"rl_step\""))
        .count();
    assert_eq!(rl, 2);

    // Checkpoints hold adapters only; the PEFT adapter directory is complete.
    let ckpt = run_dir.join("checkpoints");
    for file in ["sft.safetensors", "step-000002/model.safetensors"] {
        let tensors = Tensor::read_safetensors(ckpt.join(file)).unwrap();
        assert_eq!(tensors.len(), 2 * 3 * 2, "{file}");
        assert!(tensors.iter().all(|(n, _)| is_adapter_name(n)), "{file}");
        assert!(
            tensors.iter().all(|(_, t)| t.kind() == Kind::Float),
            "{file}"
        );
    }
    let adapter = ckpt.join("adapter");
    let tensors = Tensor::read_safetensors(adapter.join("adapter_model.safetensors")).unwrap();
    assert!(
        tensors
            .iter()
            .any(|(n, _)| { n == "base_model.model.model.layers.1.mlp.up_proj.lora_B.weight" })
    );
    let peft: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(adapter.join("adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(peft["peft_type"], "LORA");
    assert_eq!(peft["r"], 4);
    assert_eq!(peft["base_model_name_or_path"], "model");
    // Demonstrations were rendered with the template's tool calls.
    let demos = std::fs::read_to_string(run_dir.join("demos.jsonl")).unwrap();
    assert!(demos.contains("calculator"));
}

/// Trains 2 RL steps whose rollouts run on an `agentrl serve` of the base model (`lora`: the
/// `[lora]` section, or "" for full fine-tuning); checks the server followed the learner and
/// returns what was pushed last.
async fn run_with_a_rollout_server(lora: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    write_model_dir(&model_dir);
    let model = ServedModel::load(&model_dir, None, None, Device::Cpu, Dtype::F32, 16, 0).unwrap();
    let (url, state) = common::tool_model::serve_on_loopback(model, None).await;
    let text = run_config(&model_dir, lora).replace(
        "[pipeline]\n",
        &format!("[pipeline]\nrollout_servers = [\"{url}\"]\n"),
    );
    let cfg = RunConfig::from_toml_str(&text, "test").unwrap();
    assert_eq!(cfg.pipeline.rollout_servers, std::slice::from_ref(&url));
    let run_dir = dir.path().join("run");
    let run = Run::new(cfg, &run_dir).unwrap();
    let demos = run.write_demonstrations().await.unwrap();
    let learner = run.sft(&demos).unwrap();
    let (learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 2);
    assert_eq!(agentrl_core::Policy::version(&state.model.policy), 2);
    // The server now generates exactly what the learner's weights generate.
    let (vs, model) = learner.clone_model().unwrap();
    let local = agentrl_policy::TchPolicy::spawn(vs, model, 4, 0).unwrap();
    let req = agentrl_core::GenerationRequest::new(
        vec![1, 72, 105, 33],
        agentrl_core::SamplingParams::greedy(6),
    );
    let want = agentrl_core::Policy::generate(&local, vec![req.clone()])
        .await
        .unwrap();
    let got = agentrl_core::Policy::generate(&state.model.policy, vec![req])
        .await
        .unwrap();
    assert_eq!(got[0].ids, want[0].ids);
    for (a, b) in got[0].logprobs.iter().zip(&want[0].logprobs) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
    let pushed = run_dir.join("rollout-weights");
    let names: Vec<String> = std::fs::read_dir(&pushed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["v000002"], "only the newest version is kept");
    (dir, pushed.join("v000002"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lora_run_pushes_its_adapters_to_a_rollout_server() {
    let (_dir, pushed) = run_with_a_rollout_server("[lora]\nr = 4\nalpha = 8.0").await;
    assert!(pushed.join("adapter_config.json").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_fine_tuned_run_pushes_its_weights_to_a_rollout_server() {
    let (_dir, pushed) = run_with_a_rollout_server("").await;
    assert!(pushed.join("model.safetensors").is_file());
}

#[test]
fn model_and_lora_sections_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ok = run_config(dir.path(), "[lora]\nr = 8\nalpha = 16.0");
    let cfg = RunConfig::from_toml_str(&ok, "ok").unwrap();
    let lora = cfg.lora.unwrap();
    assert_eq!(lora.targets, ["q_proj", "k_proj", "v_proj", "o_proj"]);
    let bad = run_config(
        dir.path(),
        "[lora]\nr = 8\nalpha = 16.0\ntargets = [\"qkv\"]",
    );
    let e = RunConfig::from_toml_str(&bad, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.toml") && e.contains("qkv"), "{e}");
    let zero = run_config(dir.path(), "[lora]\nr = 0\nalpha = 16.0");
    let e = RunConfig::from_toml_str(&zero, "zero")
        .unwrap_err()
        .to_string();
    assert!(e.contains("lora.r"), "{e}");
    let device = run_config(dir.path(), "").replace("device = \"cpu\"", "device = \"tpu\"");
    let e = RunConfig::from_toml_str(&device, "dev")
        .unwrap_err()
        .to_string();
    assert!(e.contains("tpu"), "{e}");
    // [lora] without a pretrained model, and a tiny GPT without its shape.
    let tiny = ok
        .lines()
        .filter(|l| !l.starts_with("pretrained") && !l.starts_with("chat_template"))
        .collect::<Vec<_>>()
        .join("\n");
    let e = RunConfig::from_toml_str(&tiny, "tiny")
        .unwrap_err()
        .to_string();
    assert!(e.contains("[lora] needs a pretrained model"), "{e}");
    let no_shape = tiny.replace("[lora]\nr = 8\nalpha = 16.0", "");
    let e = RunConfig::from_toml_str(&no_shape, "tiny")
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.d_model"), "{e}");
    // bf16 is for pretrained models; unknown dtypes are named.
    let bf16_tiny = no_shape.replace("micro_batch = 2", "micro_batch = 2\ndtype = \"bf16\"");
    let e = RunConfig::from_toml_str(&bf16_tiny, "tiny")
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.dtype"), "{e}");
    let fp8 = run_config(dir.path(), "dtype = \"fp8\"");
    let e = RunConfig::from_toml_str(&fp8, "fp8.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("fp8.toml") && e.contains("fp8"), "{e}");
    // The tiny GPT's demo config is unchanged and still valid.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
    let cfg = RunConfig::load(&demo).unwrap();
    assert!(cfg.model.pretrained().is_none() && cfg.lora.is_none());
    // The example configs parse.
    for name in [
        "smollm2-calc/cpu.toml",
        "smollm2-calc/cuda.toml",
        "smollm2-multitask/cpu.toml",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name);
        let cfg = RunConfig::load(&path).unwrap();
        assert!(
            cfg.model.pretrained().is_some() && cfg.lora.is_some(),
            "{name}"
        );
    }
}
