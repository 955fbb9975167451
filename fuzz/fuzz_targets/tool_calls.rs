//! `cargo fuzz` target `tool_calls`: the Hermes/Qwen and Llama 3 tool-call parsers on generated text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::tool_calls(data));
