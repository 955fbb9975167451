//! Replays the `cargo fuzz` inputs of the policy crate's parsers on stable Rust: every committed seed
//! (`fuzz/corpus/TARGET`) and every crash found so far (`fuzz/regressions/TARGET`) goes through
//! the function its fuzz target calls, which must return without panicking.

#[path = "../../fuzz/replay.rs"]
mod replay;

use agentrl_core::Message;
use agentrl_policy::fuzzing;
use agentrl_policy::hf::ChatTemplate;
use replay::replay;

#[test]
fn tool_calls() {
    replay("tool_calls", fuzzing::tool_calls);
}

#[test]
fn chat_format() {
    replay("chat_format", fuzzing::chat_format);
}

#[test]
fn gguf() {
    replay("gguf", fuzzing::gguf);
}

#[test]
fn safetensors_header() {
    replay("safetensors_header", fuzzing::safetensors_header);
}

#[test]
fn hf_config() {
    replay("hf_config", fuzzing::hf_config);
}

#[test]
fn tokenizer_config() {
    replay("tokenizer_config", fuzzing::tokenizer_config);
}

#[test]
fn chat_template() {
    replay("chat_template", fuzzing::chat_template);
}

/// A template that would run (nearly) forever, grow without bound or recurse without end
/// renders to an error, quickly, instead of hanging the process or exhausting its memory.
#[test]
fn hostile_templates_are_bounded() {
    let messages = [Message::user("hi")];
    let hostile = [
        "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
        "{% set s = 'ab' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    ];
    for source in hostile {
        let started = std::time::Instant::now();
        let template = ChatTemplate::new(source, "", "").unwrap();
        let err = template.render(&messages, &[], true).unwrap_err();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{source} took {:?}",
            started.elapsed()
        );
        assert!(!err.to_string().is_empty());
    }
    let deep = format!(
        "{}x{}",
        "{% if true %}".repeat(400),
        "{% endif %}".repeat(400)
    );
    assert!(ChatTemplate::new(&deep, "", "").is_err());
}
