//! `cargo fuzz` target `chat_template`: a Jinja chat template compiled and rendered with a fixed conversation.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::chat_template(data));
