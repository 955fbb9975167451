//! `agentrl logprobs` on a tiny Llama checkpoint saved here (safetensors with Hugging Face
//! names + config.json) prints the same log-probabilities as `Llama::token_logprobs`, and
//! refuses bad ids and paths with clear errors. The command runs in process through
//! [`agentrl_policy::serve::logprobs::run`], which the `agentrl` binary calls.

use std::path::Path;

use agentrl_policy::PolicyModel;
use agentrl_policy::llama::{Dtype, Llama, LlamaConfig};
use agentrl_policy::serve::logprobs::{LogprobsArgs, run};
use tch::{Device, Tensor, nn};

const CONFIG: &str = r#"{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 64,
    "max_position_embeddings": 64, "tie_word_embeddings": false, "hidden_act": "silu"}"#;

/// Saves a tiny random Llama into `dir` and returns it.
fn save_tiny(dir: &Path) -> Llama {
    tch::manual_seed(5);
    let config = LlamaConfig::from_json_str(CONFIG, "tiny").unwrap();
    let vs = nn::VarStore::new(Device::Cpu);
    let model = Llama::new(&vs.root(), config).unwrap();
    tch::no_grad(|| {
        for (_, mut v) in vs.variables() {
            let noise = Tensor::randn_like(&v) * 0.3;
            let _ = v.g_add_(&noise);
        }
    });
    std::fs::write(dir.join("config.json"), CONFIG).unwrap();
    vs.save(dir.join("model.safetensors")).unwrap();
    model
}

/// `agentrl logprobs --model MODEL --ids IDS`: the JSON it printed, or its error.
fn logprobs_cmd(model: &Path, ids: &str) -> Result<serde_json::Value, String> {
    let args = LogprobsArgs {
        model: model.to_path_buf(),
        ids: ids.into(),
        dtype: Dtype::F32,
    };
    let mut out = Vec::new();
    run(&args, &mut out).map_err(|e| e.to_string())?;
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON line: {text}");
    Ok(serde_json::from_str(&text).unwrap())
}

#[test]
fn logprobs_match_token_logprobs() {
    let dir = tempfile::tempdir().unwrap();
    let model = save_tiny(dir.path());
    let ids = [3i64, 17, 42, 0, 63, 8];
    let expected = tch::no_grad(|| {
        let (lp, _) = model.token_logprobs(&Tensor::from_slice(&ids).unsqueeze(0), 1.0);
        Vec::<f32>::try_from(lp.flatten(0, -1)).unwrap()
    });
    for target in [
        dir.path().to_path_buf(),
        dir.path().join("model.safetensors"),
    ] {
        let json = logprobs_cmd(&target, "3, 17,42,0,63,8").unwrap();
        assert_eq!(json["ids"], serde_json::json!(ids));
        let lps = json["logprobs"].as_array().unwrap();
        assert_eq!(lps.len(), ids.len());
        assert!(lps[0].is_null());
        for (got, want) in lps[1..].iter().zip(&expected) {
            let got = got.as_f64().unwrap();
            assert!(got <= 0.0);
            assert!((got - f64::from(*want)).abs() < 1e-5, "{got} vs {want}");
        }
    }
}

#[test]
fn single_id_has_only_a_null_logprob() {
    let dir = tempfile::tempdir().unwrap();
    save_tiny(dir.path());
    let json = logprobs_cmd(dir.path(), "5").unwrap();
    assert_eq!(json, serde_json::json!({"ids": [5], "logprobs": [null]}));
}

#[test]
fn bad_ids_and_paths_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    save_tiny(dir.path());

    let err = logprobs_cmd(dir.path(), "1,x,3").unwrap_err();
    assert!(err.contains("`x`") && err.contains("--ids"), "{err}");

    let err = logprobs_cmd(dir.path(), "1,-2").unwrap_err();
    assert!(err.contains("`-2`"), "{err}");

    let err = logprobs_cmd(dir.path(), "1,64").unwrap_err();
    assert!(err.contains("64") && err.contains("vocabulary"), "{err}");

    let missing = dir.path().join("nope.gguf");
    let err = logprobs_cmd(&missing, "1,2").unwrap_err();
    assert!(
        err.contains("nope.gguf") && err.contains("does not exist"),
        "{err}"
    );

    let not_gguf = dir.path().join("fake.gguf");
    std::fs::write(&not_gguf, b"not a gguf file").unwrap();
    let err = logprobs_cmd(&not_gguf, "1,2").unwrap_err();
    assert!(err.contains("fake.gguf") && err.contains("GGUF"), "{err}");
}
