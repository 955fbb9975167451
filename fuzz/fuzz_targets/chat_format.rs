//! `cargo fuzz` target `chat_format`: the tiny model's chat format parsing generated ids into an assistant message.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_policy::fuzzing::chat_format(data));
