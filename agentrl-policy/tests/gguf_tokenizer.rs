//! `HfTokenizer::from_gguf` / `ChatTemplate::from_gguf`: a tiny GPT-2 style vocabulary written
//! here as GGUF metadata rebuilds into a byte-level BPE tokenizer whose control tokens are single
//! ids, and a ChatML template that renders through [`HfChatFormat`]. An opt-in test reads the
//! real SmolLM2 GGUF (`AGENTRL_SMOLLM2_GGUF`).

use std::path::Path;

use agentrl_core::Message;
use agentrl_policy::ChatFormat;
use agentrl_policy::gguf::{GgufFile, MetaArray, MetaValue, write_gguf};
use agentrl_policy::hf::{ChatTemplate, HfChatFormat, HfTokenizer};

#[path = "support/tiny_vocab.rs"]
mod tiny_vocab;

use tiny_vocab::{MERGES, tokenizer_meta};

fn tiny_file(dir: &Path, edit: impl FnOnce(&mut Vec<(String, MetaValue)>)) -> GgufFile {
    let mut kvs = vec![(
        "general.architecture".to_string(),
        MetaValue::String("llama".into()),
    )];
    kvs.extend(tokenizer_meta());
    edit(&mut kvs);
    let path = dir.join("tok.gguf");
    write_gguf(&path, &kvs, &[]).unwrap();
    GgufFile::open(&path).unwrap()
}

fn tiny_tokenizer() -> HfTokenizer {
    let dir = tempfile::tempdir().unwrap();
    HfTokenizer::from_gguf(&tiny_file(dir.path(), |_| {})).unwrap()
}

#[test]
fn text_round_trips_through_the_rebuilt_bpe() {
    let tok = tiny_tokenizer();
    assert_eq!(tok.vocab_size(), 3 + 256 + MERGES.len());
    for text in [
        "hello the world",
        " the hello\n\tx=1+2;",
        "Ünïcödé and emoji 🦀",
        "",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text, "{ids:?}");
    }
}

#[test]
fn merges_apply_in_rank_order() {
    let tok = tiny_tokenizer();
    let the = tok.token_id("Ġthe").unwrap();
    let he = tok.token_id("he").unwrap();
    let llo = tok.token_id("llo").unwrap();
    assert_eq!(tok.encode(" the").unwrap(), vec![the]);
    assert_eq!(tok.encode("hello").unwrap(), vec![he, llo]);
    // No leading space is added: "the" alone is "t" + "he".
    let t = tok.token_id("t").unwrap();
    assert_eq!(tok.encode("the").unwrap(), vec![t, he]);
}

#[test]
fn control_tokens_encode_as_single_ids() {
    let tok = tiny_tokenizer();
    let ids = tok.encode("<|im_start|>user\nhello<|im_end|>\n").unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(ids.iter().filter(|&&i| i == 1).count(), 1);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1);
    assert_eq!(tok.token_id("<|im_end|>"), Some(2));
    assert_eq!(
        tok.decode(&ids).unwrap(),
        "<|im_start|>user\nhello<|im_end|>\n"
    );
}

#[test]
fn chat_template_from_gguf_drives_a_chat_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = tiny_file(dir.path(), |_| {});
    let template = ChatTemplate::from_gguf(&file).unwrap();
    assert_eq!(template.bos_token(), "<|im_start|>");
    assert_eq!(template.eos_token(), "<|im_end|>");
    let format = HfChatFormat::new(HfTokenizer::from_gguf(&file).unwrap(), template).unwrap();
    assert_eq!(format.stop_ids(), vec![2]);
    let ids = format
        .try_render_prompt(&[Message::user("hello")], &[])
        .unwrap();
    assert_eq!(
        format.decode(&ids),
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn non_gpt2_models_and_missing_keys_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let file = tiny_file(dir.path(), |kvs| {
        kvs[1].1 = MetaValue::String("llama".into());
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("\"llama\"") && err.contains("gpt2"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        kvs.retain(|(k, _)| k != "tokenizer.ggml.merges");
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.merges"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        kvs.retain(|(k, _)| k != "tokenizer.chat_template");
    });
    let err = ChatTemplate::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.chat_template"), "{err}");

    let file = tiny_file(dir.path(), |kvs| {
        if let Some(m) = kvs.iter_mut().find(|(k, _)| k == "tokenizer.ggml.merges") {
            m.1 = MetaValue::Array(MetaArray::String(vec!["nospace".into()]));
        }
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("nospace"), "{err}");
}

#[test]
#[ignore = "needs the SmolLM2 GGUF file: set AGENTRL_SMOLLM2_GGUF"]
fn smollm2_tokenizer_from_gguf() {
    let path = std::env::var("AGENTRL_SMOLLM2_GGUF").expect("set AGENTRL_SMOLLM2_GGUF");
    let file = GgufFile::open(&path).unwrap();
    let tok = HfTokenizer::from_gguf(&file).unwrap();
    assert_eq!(tok.vocab_size(), 49_152);
    let text =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let ids = tok.encode(text).unwrap();
    assert_eq!(ids[0], 1, "{ids:?}");
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1, "{ids:?}");
    assert_eq!(tok.decode(&ids).unwrap(), text);
    // Digits are split one by one.
    assert_eq!(tok.encode("2024").unwrap().len(), 4);
    let format = HfChatFormat::new(tok, ChatTemplate::from_gguf(&file).unwrap()).unwrap();
    let rendered = format
        .try_render_prompt(&[Message::user("What is the capital of France?")], &[])
        .unwrap();
    assert_eq!(rendered[0], 1);
}
