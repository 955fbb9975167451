//! Request bodies and answer parsing of the two generation APIs (OpenAI completions with
//! vLLM's extensions, SGLang's `/generate`), and the body excerpts error messages quote.

use agentrl_core::{Error, FinishReason, Generation, GenerationRequest, SamplingParams, TokenId};
use serde_json::{Map, Value, json};

/// The sampling fields both APIs share (`top_k` and `seed` only when set).
fn sampling_fields(params: &SamplingParams, ignore_eos: bool, out: &mut Map<String, Value>) {
    out.insert("temperature".into(), json!(params.temperature));
    out.insert("top_p".into(), json!(params.top_p));
    if params.top_k > 0 {
        out.insert("top_k".into(), json!(params.top_k));
    }
    out.insert("stop_token_ids".into(), json!(params.stop_ids));
    if !params.stop.is_empty() {
        out.insert("stop".into(), json!(params.stop));
    }
    out.insert("ignore_eos".into(), json!(ignore_eos));
    out.insert("skip_special_tokens".into(), json!(false));
}

/// The body of `POST /v1/completions` for one token-id prompt.
pub(super) fn completions_body(model: &str, r: &GenerationRequest, ignore_eos: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("prompt".into(), json!(r.prompt_ids));
    body.insert("max_tokens".into(), json!(r.params.max_new_tokens));
    sampling_fields(&r.params, ignore_eos, &mut body);
    if let Some(seed) = r.params.seed {
        body.insert("seed".into(), json!(seed));
    }
    body.insert("n".into(), json!(1));
    body.insert("stream".into(), json!(false));
    body.insert("logprobs".into(), json!(1));
    body.insert("return_tokens_as_token_ids".into(), json!(true));
    Value::Object(body)
}

/// The body of SGLang's `POST /generate` for one token-id prompt.
pub(super) fn generate_body(r: &GenerationRequest, ignore_eos: bool) -> Value {
    let mut sampling = Map::new();
    sampling.insert("max_new_tokens".into(), json!(r.params.max_new_tokens));
    sampling_fields(&r.params, ignore_eos, &mut sampling);
    if let Some(seed) = r.params.seed {
        sampling.insert("sampling_seed".into(), json!(seed));
    }
    json!({
        "input_ids": r.prompt_ids,
        "sampling_params": Value::Object(sampling),
        "return_logprob": true,
        "stream": false,
    })
}

fn missing(what: &str, field: &str, answer: &Value) -> Error {
    Error::Policy(format!(
        "{what}: the answer has no `{field}`: {}",
        excerpt(&answer.to_string())
    ))
}

fn finish_from(what: &str, reason: Option<&str>) -> Result<FinishReason, Error> {
    match reason {
        Some("stop") => Ok(FinishReason::Stop),
        Some("length") => Ok(FinishReason::Length),
        other => Err(Error::Policy(format!(
            "{what}: unexpected finish reason {other:?} (expected \"stop\" or \"length\")"
        ))),
    }
}

fn token_id(what: &str, index: usize, value: &Value) -> Result<TokenId, Error> {
    value
        .as_u64()
        .and_then(|v| TokenId::try_from(v).ok())
        .ok_or_else(|| {
            Error::Policy(format!(
                "{what}: generated token {index} is {value}, not a token id"
            ))
        })
}

fn logprob(what: &str, index: usize, value: &Value) -> Result<f32, Error> {
    value.as_f64().map(|v| v as f32).ok_or_else(|| {
        Error::Policy(format!(
            "{what}: the log-probability of generated token {index} is {value}, not a number"
        ))
    })
}

/// Parses a `/v1/completions` answer: ids from vLLM's `token_id:N` tokens (or a `token_ids`
/// list), log-probabilities from `token_logprobs`, and the finish reason.
pub(super) fn parse_completion(answer: &Value, what: &str) -> Result<Generation, Error> {
    let choice = answer
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| missing(what, "choices[0]", answer))?;
    let lp = choice
        .get("logprobs")
        .filter(|v| !v.is_null())
        .ok_or_else(|| missing(what, "choices[0].logprobs", answer))?;
    let tokens = lp
        .get("tokens")
        .and_then(Value::as_array)
        .ok_or_else(|| missing(what, "choices[0].logprobs.tokens", answer))?;
    let values = lp
        .get("token_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| missing(what, "choices[0].logprobs.token_logprobs", answer))?;
    let from_tokens: Option<Vec<TokenId>> = tokens
        .iter()
        .map(|t| t.as_str()?.strip_prefix("token_id:")?.parse().ok())
        .collect();
    let ids = match (
        from_tokens,
        choice.get("token_ids").and_then(Value::as_array),
    ) {
        (Some(ids), _) => ids,
        (None, Some(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| token_id(what, i, v))
            .collect::<Result<_, _>>()?,
        (None, None) => {
            return Err(Error::Policy(format!(
                "{what}: logprobs.tokens are not of the form `token_id:N` (first: {}): the \
                 server ignored `return_tokens_as_token_ids` (vLLM and `agentrl serve` support \
                 it; for SGLang use the `/generate` flavour)",
                tokens.first().map_or("none".to_string(), Value::to_string)
            )));
        }
    };
    if values.len() != ids.len() {
        return Err(Error::Policy(format!(
            "{what}: {} generated ids but {} log-probabilities",
            ids.len(),
            values.len()
        )));
    }
    let logprobs = values
        .iter()
        .enumerate()
        .map(|(i, v)| logprob(what, i, v))
        .collect::<Result<_, _>>()?;
    let finish = finish_from(what, choice.get("finish_reason").and_then(Value::as_str))?;
    // vLLM names the matched stop string (or stop id) in `stop_reason`.
    let matched_stop = choice
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Generation {
        ids,
        logprobs,
        finish,
        matched_stop,
        policy_version: 0,
        policy_name: None,
    })
}

/// Parses an SGLang `/generate` answer: `meta_info.output_token_logprobs` holds
/// `[logprob, id, text]` per generated token; `meta_info.finish_reason.type` the finish reason.
pub(super) fn parse_generate(answer: &Value, what: &str) -> Result<Generation, Error> {
    let answer = match answer {
        Value::Array(items) if items.len() == 1 => &items[0],
        other => other,
    };
    let meta = answer
        .get("meta_info")
        .ok_or_else(|| missing(what, "meta_info", answer))?;
    let entries = meta
        .get("output_token_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| missing(what, "meta_info.output_token_logprobs", answer))?;
    let mut ids = Vec::with_capacity(entries.len());
    let mut logprobs = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let (Some(lp), Some(id)) = (e.get(0), e.get(1)) else {
            return Err(Error::Policy(format!(
                "{what}: output_token_logprobs[{i}] is {e}, not [logprob, id, text]"
            )));
        };
        logprobs.push(logprob(what, i, lp)?);
        ids.push(token_id(what, i, id)?);
    }
    let reason = meta.get("finish_reason").and_then(|f| match f {
        Value::String(s) => Some(s.as_str()),
        other => other.get("type").and_then(Value::as_str),
    });
    let finish = finish_from(what, reason)?;
    // SGLang names the matched stop string (or stop id) in `finish_reason.matched`.
    let matched_stop = meta
        .get("finish_reason")
        .and_then(|f| f.get("matched"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Generation {
        ids,
        logprobs,
        finish,
        matched_stop,
        policy_version: 0,
        policy_name: None,
    })
}

/// The policy version an `agentrl serve` answer reports (top level or in `meta_info`).
pub(super) fn reported_version(answer: &Value) -> Option<u64> {
    answer
        .get("policy_version")
        .or_else(|| {
            answer
                .get("meta_info")
                .and_then(|m| m.get("policy_version"))
        })
        .and_then(Value::as_u64)
}

/// The first 300 characters of a body, for error messages.
pub(super) fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(300).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}
