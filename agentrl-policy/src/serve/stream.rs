//! `stream: true` for `/v1/completions` and `/v1/chat/completions`: server-sent events
//! (`data: {chunk}` lines, then `data: [DONE]`) whose text deltas leave as tokens are sampled.
//!
//! Text is sent only once it is final: incomplete UTF-8 at the end is held back, the stop id
//! that ends a message is never shown, and with stop strings the last bytes that could still
//! start one are held back, so the streamed text equals the non-streamed answer's. In chat with
//! tools, the message is sent whole at the end (tool calls need the complete text to parse).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;

use agentrl_core::{Generation, GenerationRequest, SamplingParams, TokenId};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use serde_json::{Value, json};

use super::Shared;
use super::answer::{chat_message, finish_name, now_secs, output_text, stop_reason, usage};
use super::api::ApiError;
use super::model::Codec;
use crate::GenerationStream;

/// The text of a growing generation, released in safe pieces.
struct TextDeltas {
    ids: Vec<TokenId>,
    stop_ids: Vec<TokenId>,
    /// Bytes held back at the end (the longest stop string).
    hold: usize,
    /// Bytes of text already sent.
    sent: usize,
}

impl TextDeltas {
    fn new(params: &SamplingParams) -> Self {
        TextDeltas {
            ids: Vec::new(),
            stop_ids: params.stop_ids.clone(),
            hold: params.stop.iter().map(String::len).max().unwrap_or(0),
            sent: 0,
        }
    }

    /// The new text that token `id` makes final (often empty).
    fn push(&mut self, codec: &Codec, id: TokenId) -> String {
        if self.stop_ids.contains(&id) {
            return String::new();
        }
        self.ids.push(id);
        let text = codec.decode(&self.ids);
        let text = text.trim_end_matches('\u{FFFD}');
        let mut end = text.len().saturating_sub(self.hold);
        while end > 0 && !text.is_char_boundary(end) {
            end -= 1;
        }
        if end <= self.sent {
            return String::new();
        }
        let delta = text.get(self.sent..end).unwrap_or_default().to_string();
        self.sent = end;
        delta
    }

    /// What is left of the finished answer's text `full` after what was sent.
    fn rest(&self, full: &str) -> String {
        full.get(self.sent..).unwrap_or_default().to_string()
    }
}

/// Which route's chunks to write.
pub(crate) enum Shape {
    /// `/v1/completions`: `text_completion` chunks with `text` deltas.
    Completion,
    /// `/v1/chat/completions`: `chat.completion.chunk` chunks with `delta`s; with tools the
    /// message is sent whole at the end.
    Chat {
        /// Whether tools were offered.
        tools: bool,
    },
}

/// Everything the event stream carries along.
struct State {
    shared: Shared,
    generation: Option<GenerationStream>,
    deltas: TextDeltas,
    shape: Shape,
    /// The response's number (`cmpl-N` / `chatcmpl-N`, tool-call ids `call_N_0_K`).
    number: u64,
    id: String,
    prompt_tokens: usize,
    pending: VecDeque<Event>,
    done: bool,
}

impl State {
    /// The JSON of a chunk of this stream's kind around `choice`.
    fn body(&self, choice: Value) -> Value {
        let object = match self.shape {
            Shape::Completion => "text_completion",
            Shape::Chat { .. } => "chat.completion.chunk",
        };
        json!({"id": self.id, "object": object, "created": now_secs(),
               "model": self.shared.model.name, "choices": [choice]})
    }

    /// A chunk of this stream's kind around `choice`.
    fn chunk(&self, choice: Value) -> Event {
        Event::default().data(self.body(choice).to_string())
    }

    /// The chunk of one sampled token.
    fn token(&mut self, id: TokenId) -> Event {
        let text = self.deltas.push(&self.shared.model.codec, id);
        let choice = match self.shape {
            Shape::Completion => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": null,
                       "token_ids": [id]})
            }
            Shape::Chat { tools } => {
                // With tools the message is sent whole at the end.
                let delta = if tools {
                    json!({})
                } else {
                    json!({ "content": text })
                };
                json!({"index": 0, "delta": delta, "finish_reason": null, "token_ids": [id]})
            }
        };
        self.chunk(choice)
    }

    /// The last chunk (rest of the text, finish reason, usage) for the finished `g`.
    fn last(&self, g: &Generation, call_prefix: &str) -> Event {
        let codec = &self.shared.model.codec;
        let choice = match self.shape {
            Shape::Completion => {
                let text = self.deltas.rest(&output_text(codec, g));
                json!({"index": 0, "text": text, "logprobs": null,
                       "finish_reason": finish_name(g), "stop_reason": stop_reason(g),
                       "token_ids": []})
            }
            Shape::Chat { tools } => {
                let (parsed, finish) = chat_message(codec, g, call_prefix, tools);
                let content = parsed.message.content.unwrap_or_default();
                let mut delta = if tools {
                    json!({ "content": content })
                } else {
                    json!({ "content": self.deltas.rest(&content) })
                };
                if !parsed.message.tool_calls.is_empty() {
                    // Streamed tool calls carry their position in the message.
                    let calls: Vec<Value> = parsed
                        .message
                        .tool_calls
                        .iter()
                        .enumerate()
                        .map(|(i, call)| {
                            let mut call = json!(call);
                            call["index"] = json!(i);
                            call
                        })
                        .collect();
                    delta["tool_calls"] = json!(calls);
                }
                json!({"index": 0, "delta": delta, "finish_reason": finish,
                       "stop_reason": stop_reason(g), "parse_error": parsed.error})
            }
        };
        let usage = usage(self.prompt_tokens, g.ids.len());
        // Usage and the policy version ride on the last chunk.
        let mut body = self.body(choice);
        body["usage"] = usage;
        body["policy_version"] = json!(g.policy_version);
        Event::default().data(body.to_string())
    }
}

/// Starts generating `request` and answers with its event stream; `id` names the response.
pub(crate) fn sse(
    shared: Shared,
    request: GenerationRequest,
    shape: Shape,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let prompt_tokens = request.prompt_ids.len();
    let deltas = TextDeltas::new(&request.params);
    let generation = shared
        .model
        .policy
        .generate_streaming(vec![request])
        .map_err(|e| ApiError::internal(format!("generation failed: {e}")))?;
    let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let id = match shape {
        Shape::Completion => format!("cmpl-{n}"),
        Shape::Chat { .. } => format!("chatcmpl-{n}"),
    };
    let mut state = State {
        shared,
        generation: Some(generation),
        deltas,
        shape,
        number: n,
        id,
        prompt_tokens,
        pending: VecDeque::new(),
        done: false,
    };
    if let Shape::Chat { .. } = state.shape {
        let first = state.chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""},
                                       "finish_reason": null}),
        );
        state.pending.push_back(first);
    }
    let events = stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                return Some((Ok(event), state));
            }
            if state.done {
                return None;
            }
            let next = match state.generation.as_mut() {
                Some(g) => g.tokens.recv().await,
                None => None,
            };
            match next {
                Some((_, id, _)) => {
                    let event = state.token(id);
                    return Some((Ok(event), state));
                }
                None => {
                    state.done = true;
                    let Some(generation) = state.generation.take() else {
                        continue;
                    };
                    match generation.finish().await.map(|mut g| g.pop()) {
                        Ok(Some(g)) => {
                            let prefix = format!("call_{}_0_", state.number);
                            let last = state.last(&g, &prefix);
                            state.pending.push_back(last);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let error = json!({"error": {"message": format!("generation failed: {e}"),
                                                         "type": "server_error"}});
                            state
                                .pending
                                .push_back(Event::default().data(error.to_string()));
                        }
                    }
                    state.pending.push_back(Event::default().data("[DONE]"));
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Checks what a stream can carry: one prompt, one choice, no log-probabilities.
pub(crate) fn check_streamable(prompts: usize, n: usize, logprobs: bool) -> Result<(), ApiError> {
    if prompts != 1 || n != 1 {
        return Err(ApiError::bad(
            "stream: streaming answers one prompt with n = 1",
        ));
    }
    if logprobs {
        return Err(ApiError::bad(
            "stream: logprobs are not streamed; ask without stream for them",
        ));
    }
    Ok(())
}
