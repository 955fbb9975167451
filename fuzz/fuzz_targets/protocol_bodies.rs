//! `cargo fuzz` target `protocol_bodies`: the env protocol's request bodies, session header and query (env server and controller).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentrl_env::protocol::fuzzing::protocol_bodies(data));
