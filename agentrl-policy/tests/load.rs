//! The tiny GPT's shape comes from the `[model]` table of a run config alone: defaults for
//! `ffn_mult` and `rope_theta`, other keys and tables ignored, and errors that name the file
//! and the key.
#![cfg(feature = "tch")]

use agentrl_policy::load::{read_tiny_shape, tiny_shape_from_toml};
use agentrl_policy::{ChatFormat, TinyChatFormat};

const RUN: &str = r#"
seed = 3
[env]
id = "arith-calc"
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_seq_len = 160
stop = ["</answer>"]
micro_batch = 4
[rl]
steps = 3
"#;

#[test]
fn the_shape_comes_from_the_model_table_with_defaults() {
    let shape = tiny_shape_from_toml(RUN, "run.toml").unwrap();
    assert_eq!(shape.vocab_size, TinyChatFormat::new().vocab_size());
    assert_eq!(
        (
            shape.d_model,
            shape.n_layers,
            shape.n_heads,
            shape.max_seq_len
        ),
        (32, 1, 2, 160)
    );
    assert_eq!(shape.ffn_mult, 4);
    assert_eq!(shape.rope_theta, 10_000.0);
    let text = RUN.replace("micro_batch = 4", "ffn_mult = 2\nrope_theta = 500000");
    let shape = tiny_shape_from_toml(&text, "run.toml").unwrap();
    assert_eq!((shape.ffn_mult, shape.rope_theta), (2, 500_000.0));
    let text = RUN.replace("micro_batch = 4", "rope_theta = 1e4");
    assert_eq!(
        tiny_shape_from_toml(&text, "run.toml").unwrap().rope_theta,
        10_000.0
    );
}

#[test]
fn bad_model_tables_are_named_clearly() {
    let err = |text: &str| {
        tiny_shape_from_toml(text, "runs/x/config.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err(&RUN.replace("n_heads = 2\n", ""));
    assert!(
        e.contains("runs/x/config.toml") && e.contains("n_heads"),
        "{e}"
    );
    let e = err(&RUN.replace("d_model = 32", "d_model = \"wide\""));
    assert!(e.contains("model.d_model") && e.contains("integer"), "{e}");
    let e = err(&RUN.replace("d_model = 32", "d_model = -32"));
    assert!(e.contains("model.d_model") && e.contains("-32"), "{e}");
    let e = err(&RUN.replace(
        "max_seq_len = 160",
        "max_seq_len = 160\nrope_theta = \"big\"",
    ));
    assert!(e.contains("model.rope_theta"), "{e}");
    let e = err("seed = 3\n[env]\nid = \"arith-calc\"\n");
    assert!(
        e.contains("runs/x/config.toml") && e.contains("[model]"),
        "{e}"
    );
    let e = err("model = 3\n");
    assert!(e.contains("[model]"), "{e}");
    let e = err("[model\n");
    assert!(e.contains("runs/x/config.toml"), "{e}");
}

#[test]
fn a_missing_config_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let e = read_tiny_shape(&path).unwrap_err().to_string();
    assert!(e.contains("config.toml"), "{e}");
    std::fs::write(&path, RUN).unwrap();
    assert_eq!(read_tiny_shape(&path).unwrap().d_model, 32);
}
