//! Comparing secrets (bearer tokens, API keys) in time that does not depend on where the given
//! value first differs, so the answer time of a server does not leak the secret byte by byte.

/// Whether `given` equals `expected`, comparing every byte of `expected` whatever the mismatch.
///
/// The time depends only on the length of `expected` (the server's secret), never on the
/// position of the first differing byte nor on the length of `given`.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(given.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        // A missing byte compares as its complement, so it always differs.
        let g = given.get(i).copied().unwrap_or(!e);
        diff |= std::hint::black_box(g ^ e);
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn equal_secrets_match_and_any_difference_does_not() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(same_secret(b"", b""));
        for given in [
            &b"s3creT"[..],
            b"S3cret",
            b"s3cre",
            b"s3crett",
            b"",
            b"s3cret\0",
            b"x",
        ] {
            assert!(!same_secret(given, b"s3cret"), "{given:?}");
        }
        assert!(!same_secret(b"s3cret", b""));
    }
}
