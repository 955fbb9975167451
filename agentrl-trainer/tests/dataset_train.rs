//! RL on a task file of one's own: a few GRPO steps of a tiny model on a GSM8K-shaped JSONL
//! file (`question`, `answer` ending in `#### N`) played through the `dataset` env.

use std::path::Path;

use agentrl_env::dataset::DATASET_ID;
use agentrl_trainer::config::RunConfig;
use agentrl_trainer::metrics::read_metrics;
use agentrl_trainer::run::Run;
use serde_json::json;

/// Writes a GSM8K-shaped file of short word problems; returns its path.
fn write_gsm8k_file(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> = (1..=16)
        .map(|i| {
            let (a, b) = (i, i + 3);
            json!({
                "question": format!("Ann has {a} pens and gets {b}. Total?"),
                "answer": format!("{a} + {b} = <<{a}+{b}={}>>{}\n#### {}", a + b, a + b, a + b),
            })
            .to_string()
        })
        .collect();
    let path = dir.join("gsm8k_train.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// A tiny model and a short RL schedule on the `dataset` env over `data`, mapped through
/// `[env.options]` as a user's config would.
fn tiny_config(data: &Path) -> RunConfig {
    let path = toml::Value::String(data.display().to_string());
    let text = format!(
        r#####"
seed = 5
torch_threads = 1
[env]
id = "dataset"
[env.options]
path = {path}
prompt = "question"
answer = "answer"
answer_pattern = "#### (.*)$"
checker = "numeric"
test_fraction = 0.25
max_turns = 1
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 192
ffn_mult = 2
[rl]
steps = 2
tasks_per_step = 2
group_size = 2
lr = 1e-3
max_new_tokens = 12
checkpoint_every = 2
[pipeline]
max_staleness = 1
max_batch = 64
[eval]
tasks = 2
max_new_tokens = 12
"#####
    );
    RunConfig::from_toml_str(&text, "dataset test config").expect("the test config is valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rl_steps_on_a_gsm8k_shaped_file() {
    let data = tempfile::tempdir().unwrap();
    let file = write_gsm8k_file(data.path());
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(tiny_config(&file), dir.path()).unwrap();
    let learner = run.learner(1e-3, None).unwrap();
    let (learner, summary) = run.rl(learner, 0).await.unwrap();
    assert_eq!(summary.steps, 2);
    let report = run.evaluate(&learner, "after_rl", 2).await.unwrap();
    assert_eq!(report.tasks, 2);

    let records = read_metrics(&dir.path().join("metrics.jsonl")).unwrap();
    let steps: Vec<_> = records.iter().filter(|r| r["kind"] == "rl_step").collect();
    assert_eq!(steps.len(), 2, "{records:?}");
    for record in steps {
        let per_env = &record["per_task"][DATASET_ID];
        assert!(per_env.is_object(), "no `dataset` entry in {record}");
        assert!(record["reward_mean"].is_number(), "{record}");
    }
}
