//! Reading answers from other servers (an env server, as the client or the controller sees
//! it) with a size cap, so a broken or hostile server cannot make its caller allocate without
//! bound.

use std::fmt;

/// The most bytes an answer may have.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why an answer could not be read.
#[derive(Debug)]
pub(crate) enum AnswerError {
    /// The connection failed while reading.
    Transport(reqwest::Error),
    /// The answer passed [`MAX_ANSWER_BYTES`].
    TooLarge,
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerError::Transport(e) => write!(
                f,
                "reading the answer failed (connection lost?): {}",
                agentrl_core::with_causes(e)
            ),
            AnswerError::TooLarge => write!(
                f,
                "the answer is larger than {} MiB; refusing it",
                MAX_ANSWER_BYTES >> 20
            ),
        }
    }
}

/// The body of `response`, read chunk by chunk and refused once it passes
/// [`MAX_ANSWER_BYTES`] (or when its declared length already does).
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
) -> std::result::Result<Vec<u8>, AnswerError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(AnswerError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(AnswerError::Transport)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(AnswerError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
