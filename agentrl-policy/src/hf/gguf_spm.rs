//! SentencePiece tokenizers stored in GGUF metadata (`tokenizer.ggml.model = "llama"`: Llama 2,
//! Mistral 7B, TinyLlama) rebuilt as the BPE that Hugging Face's `tokenizer.json` of the same
//! model holds: merges derived from the pieces' scores, unknown bytes as `<0xNN>` tokens, and
//! spaces written as `▁` with one put before each run of text.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::{DecoderWrapper, NormalizerWrapper, Tokenizer};

use super::HfError;

/// SentencePiece's word boundary, which stands for a space.
const SPACE: &str = "\u{2581}";

/// Pieces longer than this many bytes are not split into merges (real vocabularies stop far
/// below it; it keeps a hostile file from costing time quadratic in one piece's length).
const MAX_MERGED_PIECE_BYTES: usize = 256;

/// The merges a SentencePiece BPE vocabulary implies: every split of a piece into two pieces
/// of the vocabulary, ordered by the piece's score (highest first), then by the ids of the
/// piece and of its two halves. This is the order in which SentencePiece would join them, and
/// the one Hugging Face's conversion writes into `tokenizer.json`.
fn merges_by_score(tokens: &[String], vocab: &Vocab, scores: &[f32]) -> Vec<(String, String)> {
    let mut ranked: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if piece.len() > MAX_MERGED_PIECE_BYTES {
            continue;
        }
        for (at, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(at);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right)) {
                ranked.push((scores[id], id as u32, l, r));
            }
        }
    }
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    ranked
        .into_iter()
        .map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect()
}

/// A BPE tokenizer equivalent to the SentencePiece model of `tokens` (ids in order, `vocab`
/// mapping each to its id) and their `scores`. With `add_space_prefix` (llama.cpp's
/// `tokenizer.ggml.add_space_prefix`, true unless the file says otherwise) every run of text
/// starts with `▁`, and decoding strips that one space again. `unknown` is the `<unk>` token.
pub(super) fn sentencepiece_bpe(
    tokens: &[String],
    vocab: Vocab,
    scores: &[f32],
    add_space_prefix: bool,
    unknown: Option<&str>,
    path: &str,
) -> Result<Tokenizer, HfError> {
    if scores.len() != tokens.len() {
        return Err(HfError::Tokenizer(format!(
            "{path}: tokenizer.ggml.scores has {} entries for {} tokens",
            scores.len(),
            tokens.len()
        )));
    }
    let merges = merges_by_score(tokens, &vocab, scores);
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .fuse_unk(true)
        .byte_fallback(true);
    if let Some(unknown) = unknown {
        builder = builder.unk_token(unknown.to_string());
    }
    let bpe = builder
        .build()
        .map_err(|e| HfError::Tokenizer(format!("{path}: cannot build the BPE model: {e}")))?;
    let spaces = Replace::new(" ", SPACE)
        .map_err(|e| HfError::Tokenizer(format!("{path}: space replacement: {e}")))?;
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if add_space_prefix {
        normalizers.push(Prepend::new(SPACE.to_string()).into());
    }
    normalizers.push(spaces.into());
    let unspaces = Replace::new(SPACE, " ")
        .map_err(|e| HfError::Tokenizer(format!("{path}: space replacement: {e}")))?;
    let mut decoders: Vec<DecoderWrapper> = vec![
        DecoderWrapper::Replace(unspaces),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if add_space_prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer
        .with_normalizer(Some(NormalizerSequence::new(normalizers)))
        .map_err(|e| HfError::Tokenizer(format!("{path}: cannot set the normaliser: {e}")))?;
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}
