//! The generation routes of `agentrl serve`: OpenAI completions and chat completions, and
//! SGLang's `/generate`.

use std::sync::atomic::Ordering;

use agentrl_core::{FinishReason, Generation, GenerationRequest, Policy, SamplingParams, TokenId};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::answer::{chat_message, finish_name, now_secs, output_text, stop_reason, usage};
use super::api::{
    ApiError, ChatRequest, CompletionRequest, GenerateRequest, PromptInput, RequestBody, parse_body,
};
use super::stream::{self, Shape, check_streamable};
use super::{ServeState, Shared};
use crate::http::SESSION_HEADER;

/// Rejects prompts that are empty, hold ids outside the vocabulary or leave no room to generate.
pub(crate) fn check_prompt(s: &ServeState, ids: &[TokenId], index: usize) -> Result<(), ApiError> {
    let m = &s.model;
    if ids.is_empty() {
        return Err(ApiError::bad(format!("prompt {index} is empty")));
    }
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= m.vocab_size) {
        return Err(ApiError::bad(format!(
            "prompt {index} has token id {bad}, outside the vocabulary of {}",
            m.vocab_size
        )));
    }
    if ids.len() >= m.context_len {
        return Err(ApiError::bad(format!(
            "prompt {index} has {} tokens; the model's context is {} tokens, so nothing can be \
             generated",
            ids.len(),
            m.context_len
        )));
    }
    Ok(())
}

/// The session named by the request's [`crate::http::SESSION_HEADER`], if any.
fn session_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let bad = |why: String| ApiError::bad(format!("header {SESSION_HEADER}: {why}"));
    let text = value
        .to_str()
        .map_err(|_| bad("not visible ASCII".into()))?;
    check_session_id(text).map_err(bad)?;
    Ok(Some(text.to_string()))
}

/// A session id is 1 to 256 visible ASCII characters; otherwise, what is wrong with it.
pub(crate) fn check_session_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 256 {
        return Err(format!("must have 1 to 256 characters, has {}", id.len()));
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("not visible ASCII".into());
    }
    Ok(())
}

/// Generates `n` choices per prompt (seeds `seed + j` when a seed is given), in one batch. A
/// `session` applies to a single prompt with a single choice (the next turn of one
/// conversation); the engine then reuses what it kept from the session's last turn.
async fn generate_rows(
    s: &ServeState,
    prompts: &[Vec<TokenId>],
    params: &SamplingParams,
    n: usize,
    session: Option<String>,
) -> Result<Vec<Generation>, ApiError> {
    let session = session.filter(|_| prompts.len() == 1 && n == 1);
    let mut rows = Vec::with_capacity(prompts.len() * n);
    for (i, p) in prompts.iter().enumerate() {
        check_prompt(s, p, i)?;
        for j in 0..n {
            let mut params = params.clone();
            params.seed = params.seed.map(|seed| seed.wrapping_add(j as u64));
            let mut row = GenerationRequest::new(p.clone(), params);
            row.session = session.clone();
            rows.push(row);
        }
    }
    s.model
        .policy
        .generate(rows)
        .await
        .map_err(|e| ApiError::internal(format!("generation failed: {e}")))
}

/// `POST /v1/completions`: text or token-id prompts; logprobs; generated ids in `token_ids`.
pub async fn completions(
    State(s): State<Shared>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Result<Response, ApiError> {
    let req: CompletionRequest = parse_body(&body, "/v1/completions")?;
    if req.echo {
        return Err(ApiError::bad("echo: echoing the prompt is not supported"));
    }
    let codec = &s.model.codec;
    let encode = |t: &str| {
        codec
            .encode(t)
            .map_err(|e| ApiError::bad(format!("prompt: {e}")))
    };
    let prompts: Vec<Vec<TokenId>> = match &req.prompt {
        PromptInput::Text(t) => vec![encode(t)?],
        PromptInput::Ids(ids) => vec![ids.clone()],
        PromptInput::Texts(ts) => ts.iter().map(|t| encode(t)).collect::<Result<_, _>>()?,
        PromptInput::IdLists(lists) => lists.clone(),
    };
    if prompts.is_empty() {
        return Err(ApiError::bad("prompt: no prompt given"));
    }
    let n = req.sampling.choices()?;
    let params = req.sampling.params(
        req.max_tokens.unwrap_or(16),
        codec.format().stop_ids(),
        req.ignore_eos,
    )?;
    if req.sampling.stream == Some(true) {
        check_streamable(prompts.len(), n, req.logprobs.is_some())?;
        check_prompt(&s, &prompts[0], 0)?;
        let mut request = GenerationRequest::new(prompts[0].clone(), params);
        request.session = session_of(&headers)?;
        return Ok(stream::sse(s.clone(), request, Shape::Completion)?.into_response());
    }
    let generations = generate_rows(&s, &prompts, &params, n, session_of(&headers)?).await?;
    let mut choices = Vec::with_capacity(generations.len());
    let mut completion_tokens = 0;
    for (index, g) in generations.iter().enumerate() {
        completion_tokens += g.ids.len();
        let logprobs = req.logprobs.map(|_| {
            let tokens: Vec<String> = g
                .ids
                .iter()
                .map(|&id| {
                    if req.return_tokens_as_token_ids {
                        format!("token_id:{id}")
                    } else {
                        codec.decode(&[id])
                    }
                })
                .collect();
            let mut offset = 0;
            let offsets: Vec<usize> = tokens
                .iter()
                .map(|t| {
                    let here = offset;
                    offset += t.chars().count();
                    here
                })
                .collect();
            json!({"tokens": tokens, "token_logprobs": g.logprobs, "top_logprobs": Value::Null,
                   "text_offset": offsets})
        });
        choices.push(json!({
            "index": index, "text": output_text(codec, g), "logprobs": logprobs,
            "finish_reason": finish_name(g), "stop_reason": stop_reason(g), "token_ids": g.ids,
        }));
    }
    let prompt_tokens: usize = prompts.iter().map(|p| p.len() * n).sum();
    let version = generations
        .first()
        .map_or(s.model.policy.version(), |g| g.policy_version);
    Ok(Json(json!({
        "id": format!("cmpl-{}", s.next_id.fetch_add(1, Ordering::Relaxed)),
        "object": "text_completion", "created": now_secs(), "model": s.model.name,
        "choices": choices, "usage": usage(prompt_tokens, completion_tokens),
        "policy_version": version,
    }))
    .into_response())
}

/// `POST /v1/chat/completions`: messages and tools rendered by the model's chat format; tool
/// calls parsed back into OpenAI's `tool_calls`.
pub async fn chat(
    State(s): State<Shared>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Result<Response, ApiError> {
    let req: ChatRequest = parse_body(&body, "/v1/chat/completions")?;
    if req.messages.is_empty() {
        return Err(ApiError::bad("messages: at least one message is needed"));
    }
    let tools = match req.tool_choice.as_ref().and_then(Value::as_str) {
        Some("none") => Vec::new(),
        _ => req.tools.clone().unwrap_or_default(),
    };
    let codec = &s.model.codec;
    let prompt = codec
        .render_chat(&req.messages, &tools)
        .map_err(|e| ApiError::bad(format!("messages: cannot render them: {e}")))?;
    check_prompt(&s, &prompt, 0)?;
    let room = s.model.context_len - prompt.len();
    let max = req.max_completion_tokens.or(req.max_tokens).unwrap_or(room);
    let n = req.sampling.choices()?;
    let params = req.sampling.params(max, codec.format().stop_ids(), false)?;
    if req.sampling.stream == Some(true) {
        check_streamable(1, n, req.logprobs)?;
        let shape = Shape::Chat {
            tools: !tools.is_empty(),
        };
        let mut request = GenerationRequest::new(prompt, params);
        request.session = session_of(&headers)?;
        return Ok(stream::sse(s.clone(), request, shape)?.into_response());
    }
    let session = session_of(&headers)?;
    let generations = generate_rows(&s, std::slice::from_ref(&prompt), &params, n, session).await?;
    let id = s.next_id.fetch_add(1, Ordering::Relaxed);
    let mut choices = Vec::with_capacity(n);
    let mut completion_tokens = 0;
    for (index, g) in generations.iter().enumerate() {
        completion_tokens += g.ids.len();
        let (parsed, finish) =
            chat_message(codec, g, &format!("call_{id}_{index}_"), !tools.is_empty());
        let logprobs = req.logprobs.then(|| {
            let content: Vec<Value> = g
                .ids
                .iter()
                .zip(&g.logprobs)
                .map(|(&t, &lp)| {
                    json!({"token": codec.decode(&[t]), "logprob": lp, "bytes": Value::Null,
                           "top_logprobs": []})
                })
                .collect();
            json!({ "content": content })
        });
        choices.push(json!({
            "index": index, "message": parsed.message, "logprobs": logprobs,
            "finish_reason": finish, "stop_reason": stop_reason(g), "token_ids": g.ids,
            "parse_error": parsed.error,
        }));
    }
    let version = generations
        .first()
        .map_or(s.model.policy.version(), |g| g.policy_version);
    Ok(Json(json!({
        "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": now_secs(),
        "model": s.model.name, "choices": choices,
        "usage": usage(prompt.len() * n, completion_tokens), "policy_version": version,
    }))
    .into_response())
}

/// `POST /generate` (SGLang's native API): `input_ids` or `text` in; `output_ids` and
/// `meta_info.output_token_logprobs` (`[logprob, id, null]`) out.
pub async fn generate(
    State(s): State<Shared>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Result<Json<Value>, ApiError> {
    let req: GenerateRequest = parse_body(&body, "/generate")?;
    if req.stream {
        return Err(ApiError::bad("stream: streaming is not supported"));
    }
    let codec = &s.model.codec;
    let ids = match (&req.input_ids, &req.text) {
        (Some(ids), _) => ids.clone(),
        (None, Some(text)) => codec
            .encode(text)
            .map_err(|e| ApiError::bad(format!("text: {e}")))?,
        (None, None) => return Err(ApiError::bad("give input_ids or text")),
    };
    let sp = &req.sampling_params;
    let params = sp.fields().params(
        sp.max_new_tokens.unwrap_or(128),
        codec.format().stop_ids(),
        sp.ignore_eos,
    )?;
    let g = generate_rows(
        &s,
        std::slice::from_ref(&ids),
        &params,
        1,
        session_of(&headers)?,
    )
    .await?
    .into_iter()
    .next()
    .ok_or_else(|| ApiError::internal("generation returned nothing"))?;
    let entries: Vec<Value> = g
        .ids
        .iter()
        .zip(&g.logprobs)
        .map(|(&id, &lp)| json!([lp, id, Value::Null]))
        .collect();
    let finish = match g.finish {
        FinishReason::Stop => json!({"type": "stop", "matched": stop_reason(&g)}),
        FinishReason::Length => json!({"type": "length", "length": g.ids.len()}),
    };
    Ok(Json(json!({
        "text": output_text(codec, &g), "output_ids": g.ids,
        "meta_info": {
            "id": s.next_id.fetch_add(1, Ordering::Relaxed).to_string(),
            "finish_reason": finish, "prompt_tokens": ids.len(),
            "completion_tokens": g.ids.len(), "output_token_logprobs": entries,
            "policy_version": g.policy_version,
        },
        "policy_version": g.policy_version,
    })))
}
