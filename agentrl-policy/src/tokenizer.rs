//! A byte-level tokenizer with special tokens for chat roles and tool calls.

use agentrl_core::TokenId;

/// Special tokens of [`ByteTokenizer`], in id order after the 256 byte ids.
pub const SPECIAL_TOKENS: [&str; 9] = [
    "<|pad|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|end|>",
    "<|tools|>",
    "<|tool_call|>",
    "<|/tool_call|>",
];

/// Ids of the special tokens of [`ByteTokenizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// Padding (never generated).
    pub pad: TokenId,
    /// Starts a system message.
    pub system: TokenId,
    /// Starts a user message.
    pub user: TokenId,
    /// Starts an assistant message.
    pub assistant: TokenId,
    /// Starts a tool-result message.
    pub tool: TokenId,
    /// Ends any message; the stop token of generation.
    pub end: TokenId,
    /// Starts the list of available tools.
    pub tools: TokenId,
    /// Opens a tool call inside an assistant message.
    pub tool_call: TokenId,
    /// Closes a tool call.
    pub tool_call_end: TokenId,
}

/// Tokenizer whose ids 0..=255 are raw bytes and 256.. are [`SPECIAL_TOKENS`].
///
/// Text is always encoded byte by byte, so a user who types `<|end|>` gets bytes, never the
/// special token: only the chat format inserts special ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteTokenizer;

impl ByteTokenizer {
    /// Number of ids (256 bytes + specials).
    pub const VOCAB_SIZE: usize = 256 + SPECIAL_TOKENS.len();

    /// The ids of the special tokens.
    pub const SPECIAL: SpecialIds = SpecialIds {
        pad: 256,
        system: 257,
        user: 258,
        assistant: 259,
        tool: 260,
        end: 261,
        tools: 262,
        tool_call: 263,
        tool_call_end: 264,
    };

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        Self::VOCAB_SIZE
    }

    /// Encodes text as its UTF-8 bytes.
    pub fn encode(&self, text: &str) -> Vec<TokenId> {
        text.bytes().map(TokenId::from).collect()
    }

    /// Appends the encoding of `text` to `out` (no allocation beyond `out`'s growth).
    pub fn encode_into(&self, text: &str, out: &mut Vec<TokenId>) {
        out.extend(text.bytes().map(TokenId::from));
    }

    /// Whether `id` is a special token.
    pub fn is_special(&self, id: TokenId) -> bool {
        id >= 256
    }

    /// Decodes ids to text; special tokens are written as their names, invalid UTF-8 lossily,
    /// and ids outside the vocabulary as `<|unk:ID|>`.
    pub fn decode(&self, ids: &[TokenId]) -> String {
        let mut out = String::new();
        let mut bytes = Vec::new();
        for &id in ids {
            if id < 256 {
                bytes.push(id as u8);
                continue;
            }
            out.push_str(&String::from_utf8_lossy(&bytes));
            bytes.clear();
            match SPECIAL_TOKENS.get(id as usize - 256) {
                Some(name) => out.push_str(name),
                None => out.push_str(&format!("<|unk:{id}|>")),
            }
        }
        out.push_str(&String::from_utf8_lossy(&bytes));
        out
    }

    /// Decodes ids that should be plain text (bytes only); special ids are dropped.
    pub fn decode_text(&self, ids: &[TokenId]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .filter(|&&id| id < 256)
            .map(|&id| id as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
