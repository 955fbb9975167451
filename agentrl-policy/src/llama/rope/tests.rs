//! Frequencies against transformers 5.24's own rope init functions. The expected values were
//! printed (float32, so compared with a relative tolerance) by this snippet:
//!
//! ```python
//! from transformers import LlamaConfig
//! from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
//! from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
//! def run(rp):
//!     cfg = LlamaConfig(hidden_size=64, num_attention_heads=4,
//!                       max_position_embeddings=4096, rope_parameters=rp)
//!     t = cfg.rope_parameters["rope_type"]
//!     if t == "default":
//!         inv, att = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg, device="cpu")
//!     else:
//!         inv, att = ROPE_INIT_FUNCTIONS[t](cfg, "cpu")
//!     print([float(x) for x in inv.double()], att)
//! ```

use super::*;

const HEAD_DIM: usize = 16;
const CONTEXT: usize = 4096;

fn block(json: &str) -> RopeScaling {
    serde_json::from_str(json).expect("test block")
}

fn assert_close(ours: &[f64], theirs: &[f64]) {
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs(),
            "inv_freq[{i}]: ours {a}, transformers {b}"
        );
    }
}

#[test]
fn default_frequencies_match_transformers() {
    let f = rope_frequencies(100_000.0, HEAD_DIM, None, CONTEXT);
    let theirs = [
        1.0,
        0.23713736236095428,
        0.05623412877321243,
        0.01333521492779255,
        0.003162277862429619,
        0.0007498941849917173,
        0.00017782794020604342,
        4.216965317027643e-05,
    ];
    assert_close(&f.inv_freq, &theirs);
    assert_eq!(f.attention_scaling, 1.0);
}

#[test]
fn linear_frequencies_match_transformers() {
    let s = block(r#"{"rope_type": "linear", "factor": 4.0}"#);
    let f = rope_frequencies(10_000.0, HEAD_DIM, Some(&s), CONTEXT);
    let theirs = [
        0.25,
        0.07905694097280502,
        0.02500000037252903,
        0.007905694656074047,
        0.0024999999441206455,
        0.0007905694656074047,
        0.0002500000118743628,
        7.905694656074047e-05,
    ];
    assert_close(&f.inv_freq, &theirs);
}

#[test]
fn dynamic_frequencies_match_transformers_within_the_context() {
    let s = block(r#"{"rope_type": "dynamic", "factor": 2.0}"#);
    let f = rope_frequencies(10_000.0, HEAD_DIM, Some(&s), CONTEXT);
    let theirs = [
        1.0,
        0.3162277638912201,
        0.10000000149011612,
        0.03162277862429619,
        0.009999999776482582,
        0.003162277862429619,
        0.0010000000474974513,
        0.0003162277862429619,
    ];
    assert_close(&f.inv_freq, &theirs);
}

#[test]
fn llama3_frequencies_match_transformers() {
    let s = block(
        r#"{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 512}"#,
    );
    let f = rope_frequencies(500_000.0, HEAD_DIM, Some(&s), CONTEXT);
    let theirs = [
        1.0,
        0.193922758102417,
        0.02734413370490074,
        0.0009115831344388425,
        0.00017677668074611574,
        3.428102354519069e-05,
        6.647869668086059e-06,
        1.289173155782919e-06,
    ];
    assert_close(&f.inv_freq, &theirs);
}

#[test]
fn yarn_frequencies_and_attention_factor_match_transformers() {
    let s =
        block(r#"{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}"#);
    let f = rope_frequencies(10_000.0, HEAD_DIM, Some(&s), CONTEXT);
    let theirs = [
        1.0,
        0.3162277638912201,
        0.08125000447034836,
        0.019764237105846405,
        0.0043750000186264515,
        0.0007905694656074047,
        0.0002500000118743628,
        7.905694656074047e-05,
    ];
    assert_close(&f.inv_freq, &theirs);
    assert!((f.attention_scaling - 1.138629436111989).abs() < 1e-12);
}

#[test]
fn yarn_with_betas_mscale_and_no_truncation_matches_transformers() {
    let s = block(
        r#"{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
            "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0,
            "truncate": false}"#,
    );
    let f = rope_frequencies(10_000.0, HEAD_DIM, Some(&s), CONTEXT);
    let theirs = [
        1.0,
        0.3162277638912201,
        0.10000000149011612,
        0.01870180480182171,
        0.0024999999441206455,
        0.0007905694656074047,
        0.0002500000118743628,
        7.905694656074047e-05,
    ];
    assert_close(&f.inv_freq, &theirs);
    assert!((f.attention_scaling - 0.964326914892074).abs() < 1e-12);
}

#[test]
fn yarn_explicit_attention_factor_wins() {
    let s = block(
        r#"{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
            "attention_factor": 0.5}"#,
    );
    let f = rope_frequencies(10_000.0, HEAD_DIM, Some(&s), CONTEXT);
    assert_eq!(f.attention_scaling, 0.5);
}

fn read(json: &str) -> Result<ConfigRope> {
    let root: Json = serde_json::from_str(json).expect("test json");
    let object = root.as_object().expect("object").clone();
    read_config_rope(&object, CONTEXT, "dir/config.json")
}

fn error_of(json: &str) -> String {
    match read(json) {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn rope_parameters_theta_wins_over_the_default() {
    let r = read(r#"{"rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}"#)
        .expect("valid");
    assert_eq!(r.theta, 100_000.0);
    assert_eq!(r.scaling, None);
}

#[test]
fn top_level_rope_theta_and_rope_scaling_are_read() {
    let r = read(r#"{"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}}"#)
        .expect("valid");
    assert_eq!(r.theta, 500_000.0);
    assert_eq!(r.scaling.expect("scaling").factor, Some(2.0));
    assert_eq!(read("{}").expect("valid").theta, DEFAULT_ROPE_THETA);
}

#[test]
fn llama3_block_without_original_context_takes_the_model_context() {
    let r = read(
        r#"{"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0}}"#,
    )
    .expect("valid");
    let s = r.scaling.expect("scaling");
    assert_eq!(s.original_max_position_embeddings, Some(CONTEXT as f64));
}

#[test]
fn full_attention_nesting_is_unwrapped() {
    let r = read(r#"{"rope_parameters": {"full_attention": {"rope_theta": 1e6}}}"#).expect("valid");
    assert_eq!(r.theta, 1e6);
}

#[test]
fn unsupported_rope_settings_are_errors_naming_the_key_and_file() {
    let cases = [
        (
            r#"{"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}"#,
            "`longrope`",
        ),
        (
            r#"{"rope_parameters": {"rope_type": "linear", "factor": 2.0, "mrope_section": [1]}}"#,
            "`mrope_section`",
        ),
        (
            r#"{"rope_parameters": {"full_attention": {"rope_theta": 1e6},
                "sliding_attention": {"rope_theta": 1e4}}}"#,
            "per layer type",
        ),
        (
            r#"{"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5}}"#,
            "partial_rotary_factor",
        ),
        (
            r#"{"partial_rotary_factor": 0.25}"#,
            "partial_rotary_factor",
        ),
        (
            r#"{"rope_parameters": {"rope_theta": 1e4},
                "rope_scaling": {"rope_type": "linear", "factor": 2.0}}"#,
            "`rope_scaling`",
        ),
        (
            r#"{"rope_parameters": {"rope_type": "linear"}}"#,
            "factor is missing",
        ),
        (r#"{"rope_theta": "big"}"#, "`rope_theta` must be a number"),
    ];
    for (json, needle) in cases {
        let message = error_of(json);
        assert!(message.contains(needle), "{json}: {message}");
        assert!(message.contains("dir/config.json"), "{json}: {message}");
    }
}
