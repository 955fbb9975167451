//! [`GenerationDefaults`]: what a Hugging Face model directory's `generation_config.json` says
//! about generating: its end-of-sequence ids (one id or a list), which end generation, and its
//! sampling defaults (temperature, top-p, top-k), shown to users.

use std::path::Path;

use agentrl_core::TokenId;
use serde_json::Value as Json;

use super::HfError;

/// The generation settings file of a Hugging Face model directory.
pub const GENERATION_CONFIG_FILE: &str = "generation_config.json";

/// The parts of a `generation_config.json` AgentRL uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDefaults {
    /// `eos_token_id`: ids that end generation (empty when absent).
    pub eos_token_ids: Vec<TokenId>,
    /// `do_sample`, if given.
    pub do_sample: Option<bool>,
    /// `temperature`, if given.
    pub temperature: Option<f64>,
    /// `top_p`, if given.
    pub top_p: Option<f64>,
    /// `top_k`, if given.
    pub top_k: Option<u64>,
}

impl GenerationDefaults {
    /// Parses the text of a `generation_config.json`; `origin` names it in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, HfError> {
        let bad = |m: String| HfError::Config(format!("{origin}: {m}"));
        let root: Json =
            serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let get = |key: &str| root.get(key).filter(|v| !v.is_null());
        let number = |key: &str| -> Result<Option<f64>, HfError> {
            get(key)
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| bad(format!("`{key}` must be a number, got {v}")))
                })
                .transpose()
        };
        let eos_token_ids = match get("eos_token_id") {
            None => Vec::new(),
            Some(Json::Array(list)) => list
                .iter()
                .map(|v| {
                    token_id(v)
                        .ok_or_else(|| bad(format!("`eos_token_id` entry {v} is not a token id")))
                })
                .collect::<Result<_, _>>()?,
            Some(v) => vec![token_id(v).ok_or_else(|| {
                bad(format!(
                    "`eos_token_id` {v} is not a token id or a list of them"
                ))
            })?],
        };
        let top_k = get("top_k")
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| bad(format!("`top_k` must be a whole number, got {v}")))
            })
            .transpose()?;
        let do_sample = get("do_sample")
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| bad(format!("`do_sample` must be true or false, got {v}")))
            })
            .transpose()?;
        Ok(GenerationDefaults {
            eos_token_ids,
            do_sample,
            temperature: number("temperature")?,
            top_p: number("top_p")?,
            top_k,
        })
    }

    /// Reads `generation_config.json` from a model directory; `None` when there is none.
    pub fn from_model_dir(dir: &Path) -> Result<Option<Self>, HfError> {
        let path = dir.join(GENERATION_CONFIG_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path).map_err(|source| HfError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json_str(&text, &path.display().to_string()).map(Some)
    }

    /// One line for users: the sampling defaults and end-of-sequence ids that are set.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(v) = self.do_sample {
            parts.push(format!("do_sample={v}"));
        }
        if let Some(v) = self.temperature {
            parts.push(format!("temperature={v}"));
        }
        if let Some(v) = self.top_p {
            parts.push(format!("top_p={v}"));
        }
        if let Some(v) = self.top_k {
            parts.push(format!("top_k={v}"));
        }
        if !self.eos_token_ids.is_empty() {
            parts.push(format!("eos_token_id={:?}", self.eos_token_ids));
        }
        if parts.is_empty() {
            "none set".to_string()
        } else {
            parts.join(" ")
        }
    }
}

/// A JSON value as a token id, if it is a non-negative integer that fits.
fn token_id(v: &Json) -> Option<TokenId> {
    v.as_u64().and_then(|id| TokenId::try_from(id).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eos_ids_are_read_as_one_id_or_a_list() {
        let one =
            GenerationDefaults::from_json_str(r#"{"eos_token_id": 2}"#, "g.json").expect("valid");
        assert_eq!(one.eos_token_ids, vec![2]);
        let list = GenerationDefaults::from_json_str(
            r#"{"eos_token_id": [128001, 128008, 128009], "do_sample": true,
                "temperature": 0.6, "top_p": 0.9, "top_k": 20, "bos_token_id": 1}"#,
            "g.json",
        )
        .expect("valid");
        assert_eq!(list.eos_token_ids, vec![128001, 128008, 128009]);
        assert_eq!(
            list.summary(),
            "do_sample=true temperature=0.6 top_p=0.9 top_k=20 eos_token_id=[128001, 128008, 128009]"
        );
        let none = GenerationDefaults::from_json_str(r#"{"eos_token_id": null}"#, "g.json")
            .expect("valid");
        assert_eq!(none.summary(), "none set");
    }

    #[test]
    fn bad_values_are_errors_naming_the_key_and_file() {
        for (json, key) in [
            (r#"{"eos_token_id": "x"}"#, "eos_token_id"),
            (r#"{"eos_token_id": [1, -2]}"#, "eos_token_id"),
            (r#"{"temperature": "hot"}"#, "temperature"),
            (r#"{"top_k": 0.5}"#, "top_k"),
        ] {
            let Err(e) = GenerationDefaults::from_json_str(json, "m/generation_config.json") else {
                panic!("{json} was accepted");
            };
            let message = e.to_string();
            assert!(
                message.contains(key) && message.contains("m/generation_config.json"),
                "{message}"
            );
        }
    }
}
