//! A Hugging Face `tokenizer.json` tokenizer.

use std::path::Path;
use std::str::FromStr;

use agentrl_core::TokenId;
use tokenizers::Tokenizer;

use super::HfError;

/// A tokenizer loaded from a Hugging Face `tokenizer.json` (BPE, WordLevel, Unigram, ...).
#[derive(Clone)]
pub struct HfTokenizer {
    inner: Tokenizer,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

impl HfTokenizer {
    /// Loads `tokenizer.json` from a file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, HfError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| HfError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_str(&text).map_err(|e| HfError::Tokenizer(format!("{}: {e}", path.display())))
    }

    /// Wraps an already built `tokenizers` tokenizer.
    pub fn from_tokenizer(inner: Tokenizer) -> Self {
        HfTokenizer { inner }
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Encodes text without adding BOS/EOS (chat templates write those themselves); special
    /// tokens written in the text (e.g. `<|im_start|>`) become their ids.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, HfError> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| HfError::Tokenizer(format!("cannot encode {:?}: {e}", short(text))))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decodes ids to text, special tokens included.
    pub fn decode(&self, ids: &[TokenId]) -> Result<String, HfError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| HfError::Tokenizer(format!("cannot decode {} ids: {e}", ids.len())))
    }

    /// The id of a token given as its string (e.g. `"<|im_end|>"`), if the vocabulary has it.
    pub fn token_id(&self, token: &str) -> Option<TokenId> {
        self.inner.token_to_id(token)
    }

    /// The string of an id, if the vocabulary has it.
    pub fn id_token(&self, id: TokenId) -> Option<String> {
        self.inner.id_to_token(id)
    }
}

impl FromStr for HfTokenizer {
    type Err = HfError;

    /// Parses the contents of a `tokenizer.json`.
    fn from_str(json: &str) -> Result<Self, HfError> {
        let inner = Tokenizer::from_str(json)
            .map_err(|e| HfError::Tokenizer(format!("invalid tokenizer.json: {e}")))?;
        Ok(HfTokenizer { inner })
    }
}

/// The start of a text, for error messages.
fn short(text: &str) -> String {
    text.chars().take(80).collect()
}
