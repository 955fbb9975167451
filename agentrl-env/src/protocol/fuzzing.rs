//! Entry point of the `protocol_bodies` `cargo fuzz` target (under `fuzz/` at the repository
//! root) and of the replay test `tests/fuzz_regressions.rs`, which feeds it the committed corpus
//! and every crash found so far on stable Rust. Not part of the stable API.

use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, Uri};

use super::controller::{parse_heartbeat_body, parse_register_body};
use super::http::{indices_query, session_id};
use super::server::{parse_interact_body, parse_start_sample_body};
use super::{IndicesQuery, SESSION_HEADER};

/// What a client controls in one request, chosen by the first byte of `data` (modulo 6), the
/// rest being the request's body, header value or query string: the `start_sample` body
/// (0, the env server's and the controller's parser), the `interact` body (1), the controller's
/// `register` (2) and `heartbeat` (3) bodies, the `session_id` header (4) and the
/// `get_indices` query (5). Each goes through the function the handler calls.
pub fn protocol_bodies(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 6 {
        0 => drop(parse_start_sample_body(rest)),
        1 => drop(parse_interact_body(rest)),
        2 => drop(parse_register_body(rest)),
        3 => drop(parse_heartbeat_body(rest)),
        4 => {
            if let Ok(value) = HeaderValue::from_bytes(rest) {
                let mut headers = HeaderMap::new();
                headers.insert(SESSION_HEADER, value);
                let _ = session_id(&headers);
            }
        }
        _ => {
            let query = String::from_utf8_lossy(rest);
            if let Ok(uri) = format!("/api/get_indices?{query}").parse::<Uri>() {
                let _ = indices_query(Query::<IndicesQuery>::try_from_uri(&uri));
            }
        }
    }
}
