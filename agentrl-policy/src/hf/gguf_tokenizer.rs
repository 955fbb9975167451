//! Rebuilding a Hugging Face tokenizer and chat template from the metadata of a llama.cpp GGUF
//! file: GPT-2 style byte-level BPE (`tokenizer.ggml.model = "gpt2"`) or SentencePiece BPE
//! (`"llama"`, in `gguf_spm.rs`). Byte-level BPE gets the split pattern
//! of the model family that `tokenizer.ggml.pre` names (GPT-2, SmolLM2/StarCoder, Llama 3,
//! Qwen2/Qwen3), so the ids are the ones the model's own `tokenizer.json` gives.

use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer,
};

use super::{ChatTemplate, HfError, HfTokenizer, gguf_spm};
use crate::gguf::{GgufFile, MetaArray, MetaValue};

/// GGUF token type of the unknown token (`<unk>`).
const TOKEN_TYPE_UNKNOWN: i64 = 2;
/// GGUF token type of control tokens (`<|im_start|>`, `<|endoftext|>`, ...).
const TOKEN_TYPE_CONTROL: i64 = 3;
/// GGUF token type of user-defined tokens (added, but not special).
const TOKEN_TYPE_USER_DEFINED: i64 = 4;
/// The split pattern of Llama 3's tokenizer (`tokenizer.ggml.pre = "llama-bpe"`; Falcon 3 uses
/// it too): numbers in groups of up to three digits, contractions in any case, a letter run
/// with one leading non-letter.
const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split pattern of Qwen2's and Qwen3's tokenizer (`tokenizer.ggml.pre = "qwen2"`): as
/// Llama 3's, but every digit alone.
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The `tokenizer.ggml.pre` values this rebuild knows (llama.cpp's names), each standing for
/// the normaliser and pre-tokenizer of the model's own `tokenizer.json`.
pub const GGUF_PRE_TOKENIZERS: [&str; 10] = [
    "default",
    "gpt-2",
    "smollm",
    "starcoder",
    "llama-bpe",
    "llama3",
    "llama-v3",
    "falcon3",
    "qwen2",
    "deepseek-r1-qwen",
];

/// The normaliser and pre-tokenizer that `tokenizer.ggml.pre` (absent: GPT-2's) stands for.
/// An unknown value is an error: another split pattern gives other ids than the model was
/// trained on, silently.
fn pre_tokenizer(
    pre: Option<&str>,
    path: &str,
) -> Result<(Option<NormalizerWrapper>, PreTokenizerWrapper), HfError> {
    let split_then_bytes = |pattern: &str| -> Result<PreTokenizerWrapper, HfError> {
        let split = Split::new(
            SplitPattern::Regex(pattern.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| HfError::Tokenizer(format!("{path}: split pattern: {e}")))?;
        Ok(Sequence::new(vec![
            split.into(),
            ByteLevel::new(false, false, false).into(),
        ])
        .into())
    };
    Ok(match pre {
        None | Some("default" | "gpt-2") => (None, ByteLevel::new(false, true, true).into()),
        Some("smollm" | "starcoder") => (
            None,
            Sequence::new(vec![
                Digits::new(true).into(),
                ByteLevel::new(false, true, true).into(),
            ])
            .into(),
        ),
        Some("llama-bpe" | "llama3" | "llama-v3" | "falcon3") => {
            (None, split_then_bytes(LLAMA3_PATTERN)?)
        }
        // DeepSeek-R1's distillations into Qwen2.5 keep Qwen's tokenizer.
        Some("qwen2" | "deepseek-r1-qwen") => (Some(NFC.into()), split_then_bytes(QWEN2_PATTERN)?),
        Some(other) => {
            return Err(HfError::Tokenizer(format!(
                "{path}: tokenizer.ggml.pre is {other:?}, whose split pattern this rebuild does \
                 not know (it knows {GGUF_PRE_TOKENIZERS:?}); load the model's Hugging Face \
                 directory (tokenizer.json) instead"
            )));
        }
    })
}

/// A GGUF metadata error as an [`HfError`], naming the file.
fn meta_err(e: crate::gguf::GgufError) -> HfError {
    HfError::Tokenizer(format!("GGUF tokenizer metadata: {e}"))
}

/// The integers of a metadata array of any integer element type.
fn int_array(file: &GgufFile, key: &str) -> Result<Vec<i64>, HfError> {
    let wrong = || {
        HfError::Tokenizer(format!(
            "{}: `{key}` is not an array of integers",
            file.path().display()
        ))
    };
    let values: Vec<i64> = match file.get_array(key).map_err(meta_err)? {
        MetaArray::U8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::I8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::U16(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::I16(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::U32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        MetaArray::I64(v) => v.clone(),
        MetaArray::U64(v) => v
            .iter()
            .map(|&x| i64::try_from(x).map_err(|_| wrong()))
            .collect::<Result<_, _>>()?,
        _ => return Err(wrong()),
    };
    Ok(values)
}

/// The token string of an optional id key (e.g. `tokenizer.ggml.bos_token_id`), or `""`.
fn token_of(file: &GgufFile, tokens: &[String], key: &str) -> Result<String, HfError> {
    let Some(value) = file.get(key) else {
        return Ok(String::new());
    };
    let id = match value {
        MetaValue::Array(_) => None,
        v => v.as_i128(),
    }
    .and_then(|i| usize::try_from(i).ok())
    .ok_or_else(|| {
        HfError::Tokenizer(format!(
            "{}: `{key}` is not a token id",
            file.path().display()
        ))
    })?;
    tokens.get(id).cloned().ok_or_else(|| {
        HfError::Tokenizer(format!(
            "{}: `{key}` = {id} is outside the vocabulary of {}",
            file.path().display(),
            tokens.len()
        ))
    })
}

/// The ids of `tokens`, which must be distinct.
fn vocab_of(tokens: &[String], path: &str) -> Result<Vocab, HfError> {
    let mut vocab = Vocab::with_capacity(tokens.len());
    for (id, token) in tokens.iter().enumerate() {
        let id = u32::try_from(id)
            .map_err(|_| HfError::Tokenizer(format!("{path}: more than u32::MAX tokens")))?;
        if vocab.insert(token.clone(), id).is_some() {
            return Err(HfError::Tokenizer(format!(
                "{path}: token {token:?} appears twice in tokenizer.ggml.tokens"
            )));
        }
    }
    Ok(vocab)
}

/// A GPT-2 style byte-level BPE (`tokenizer.ggml.model = "gpt2"`) from the file's merges, with
/// the normaliser and split pattern `tokenizer.ggml.pre` names.
fn byte_level_bpe(file: &GgufFile, tokens: &[String], path: &str) -> Result<Tokenizer, HfError> {
    let merge_lines = file
        .get_array_str("tokenizer.ggml.merges")
        .map_err(meta_err)?;
    let merges = merge_lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            line.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| {
                    HfError::Tokenizer(format!(
                        "{path}: merge {i} ({line:?}) is not two tokens separated by a space"
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab_of(tokens, path)?, merges)
        .build()
        .map_err(|e| HfError::Tokenizer(format!("{path}: cannot build the BPE model: {e}")))?;
    let pre = match file.get("tokenizer.ggml.pre") {
        None => None,
        Some(MetaValue::String(p)) => Some(p.as_str()),
        Some(_) => {
            return Err(HfError::Tokenizer(format!(
                "{path}: tokenizer.ggml.pre is not a string"
            )));
        }
    };
    let (normalizer, pre_tokenizer) = pre_tokenizer(pre, path)?;
    let mut inner = Tokenizer::new(bpe);
    inner
        .with_normalizer(normalizer)
        .map_err(|e| HfError::Tokenizer(format!("{path}: cannot set the normaliser: {e}")))?;
    inner.with_pre_tokenizer(Some(pre_tokenizer));
    inner.with_decoder(Some(ByteLevel::new(false, true, true)));
    Ok(inner)
}

/// A SentencePiece BPE (`tokenizer.ggml.model = "llama"`) from the file's pieces and scores.
fn sentencepiece(
    file: &GgufFile,
    tokens: &[String],
    types: &[i64],
    path: &str,
) -> Result<Tokenizer, HfError> {
    let scores = match file.get_array("tokenizer.ggml.scores").map_err(meta_err)? {
        MetaArray::F32(scores) => scores,
        _ => {
            return Err(HfError::Tokenizer(format!(
                "{path}: tokenizer.ggml.scores is not an array of f32"
            )));
        }
    };
    let add_space_prefix = match file.get("tokenizer.ggml.add_space_prefix") {
        None => true,
        Some(_) => file
            .get_bool("tokenizer.ggml.add_space_prefix")
            .map_err(meta_err)?,
    };
    let unknown = match file.get("tokenizer.ggml.unknown_token_id") {
        Some(_) => Some(token_of(file, tokens, "tokenizer.ggml.unknown_token_id")?),
        None => types
            .iter()
            .position(|&t| t == TOKEN_TYPE_UNKNOWN)
            .map(|id| tokens[id].clone()),
    };
    gguf_spm::sentencepiece_bpe(
        tokens,
        vocab_of(tokens, path)?,
        scores,
        add_space_prefix,
        unknown.as_deref(),
        path,
    )
}

impl HfTokenizer {
    /// Rebuilds a tokenizer from a GGUF file's `tokenizer.ggml.*` metadata: a GPT-2 style
    /// byte-level BPE (`tokenizer.ggml.model = "gpt2"`) with the normaliser and split pattern
    /// `tokenizer.ggml.pre` names (one of [`GGUF_PRE_TOKENIZERS`]; another is an error), or a
    /// SentencePiece BPE (`"llama"`: Llama 2, Mistral, TinyLlama) as its `tokenizer.json`
    /// holds it. Control and unknown tokens (types 3 and 2) become special tokens that encode
    /// as single ids.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, HfError> {
        let path = file.path().display().to_string();
        let model = file.get_str("tokenizer.ggml.model").map_err(meta_err)?;
        let tokens = file
            .get_array_str("tokenizer.ggml.tokens")
            .map_err(meta_err)?;
        let types = match file.get("tokenizer.ggml.token_type") {
            Some(_) => int_array(file, "tokenizer.ggml.token_type")?,
            None => Vec::new(),
        };
        if !types.is_empty() && types.len() != tokens.len() {
            return Err(HfError::Tokenizer(format!(
                "{path}: tokenizer.ggml.token_type has {} entries for {} tokens",
                types.len(),
                tokens.len()
            )));
        }
        let mut inner = match model {
            "gpt2" => byte_level_bpe(file, tokens, &path)?,
            "llama" => sentencepiece(file, tokens, &types, &path)?,
            other => {
                return Err(HfError::Tokenizer(format!(
                    "{path}: tokenizer.ggml.model is {other:?}; only \"gpt2\" (byte-level BPE) \
                     and \"llama\" (SentencePiece BPE) can be rebuilt from GGUF metadata"
                )));
            }
        };
        let mut special = Vec::new();
        let mut user = Vec::new();
        for (token, &kind) in tokens.iter().zip(&types) {
            match kind {
                TOKEN_TYPE_CONTROL | TOKEN_TYPE_UNKNOWN => {
                    special.push(AddedToken::from(token.clone(), true))
                }
                TOKEN_TYPE_USER_DEFINED => user.push(AddedToken::from(token.clone(), false)),
                _ => {}
            }
        }
        inner
            .add_special_tokens(special)
            .map_err(|e| HfError::Tokenizer(format!("{path}: cannot add control tokens: {e}")))?;
        inner
            .add_tokens(user)
            .map_err(|e| HfError::Tokenizer(format!("{path}: cannot add user tokens: {e}")))?;
        Ok(HfTokenizer::from_tokenizer(inner))
    }
}

impl ChatTemplate {
    /// Compiles the GGUF file's `tokenizer.chat_template`, with the BOS/EOS strings of its
    /// `tokenizer.ggml.bos_token_id` / `eos_token_id` (empty when absent).
    pub fn from_gguf(file: &GgufFile) -> Result<Self, HfError> {
        Self::from_gguf_with_override(file, None)
    }

    /// [`ChatTemplate::from_gguf`], with `source_override` (Jinja source) compiled instead of
    /// the file's template when given: the file then needs no template of its own.
    pub fn from_gguf_with_override(
        file: &GgufFile,
        source_override: Option<&str>,
    ) -> Result<Self, HfError> {
        let source = match source_override {
            Some(source) => source,
            None => file.get_str("tokenizer.chat_template").map_err(|e| {
                HfError::Config(format!("the GGUF file has no usable chat template: {e}"))
            })?,
        };
        let tokens = file
            .get_array_str("tokenizer.ggml.tokens")
            .map_err(meta_err)?;
        let bos = token_of(file, tokens, "tokenizer.ggml.bos_token_id")?;
        let eos = token_of(file, tokens, "tokenizer.ggml.eos_token_id")?;
        ChatTemplate::new(source, &bos, &eos)
    }
}
