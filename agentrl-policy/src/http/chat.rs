//! [`HttpPolicy::chat`]: one `/v1/chat/completions` call, messages and tools in, an assistant
//! [`Message`] (with `tool_calls`) out. The server renders and parses, so it is not token-exact.

use agentrl_core::{Error, Message, Result, Role, SamplingParams, ToolSpec};
use serde_json::{Map, Value, json};

use super::client::HttpPolicy;
use super::wire::excerpt;

/// What a chat completion returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The assistant message, tool calls included.
    pub message: Message,
    /// OpenAI's finish reason (`stop`, `length`, `tool_calls`, ...).
    pub finish_reason: String,
    /// The weights version, when the server reports one (`agentrl serve` does).
    pub policy_version: Option<u64>,
}

impl HttpPolicy {
    /// Asks the server's chat endpoint to answer `messages`, offering `tools`. Sampling params
    /// map to `temperature`, `top_p`, `max_tokens`, `seed`, and (when set) `top_k`,
    /// `stop_token_ids` and `stop`.
    pub async fn chat(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        params: &SamplingParams,
    ) -> Result<ChatReply> {
        params.validate()?;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_name()));
        body.insert("messages".into(), json!(messages));
        if !tools.is_empty() {
            body.insert("tools".into(), json!(tools));
        }
        body.insert("temperature".into(), json!(params.temperature));
        body.insert("top_p".into(), json!(params.top_p));
        body.insert("max_tokens".into(), json!(params.max_new_tokens));
        if params.top_k > 0 {
            body.insert("top_k".into(), json!(params.top_k));
        }
        if !params.stop_ids.is_empty() {
            body.insert("stop_token_ids".into(), json!(params.stop_ids));
        }
        if !params.stop.is_empty() {
            body.insert("stop".into(), json!(params.stop));
        }
        if let Some(seed) = params.seed {
            body.insert("seed".into(), json!(seed));
        }
        let path = "/v1/chat/completions";
        let answer = self.post_json(path, &Value::Object(body)).await?;
        let what = format!("POST {}{path}", self.base_url());
        let choice = answer
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| {
                Error::Policy(format!(
                    "{what}: the answer has no choices[0]: {}",
                    excerpt(&answer.to_string())
                ))
            })?;
        let raw = choice.get("message").cloned().ok_or_else(|| {
            Error::Policy(format!(
                "{what}: choices[0] has no message: {}",
                excerpt(&choice.to_string())
            ))
        })?;
        let message: Message = serde_json::from_value(raw)
            .map_err(|e| Error::Policy(format!("{what}: choices[0].message is malformed: {e}")))?;
        if message.role != Role::Assistant {
            return Err(Error::Policy(format!(
                "{what}: choices[0].message has role {:?}, expected assistant",
                message.role
            )));
        }
        Ok(ChatReply {
            message,
            finish_reason: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            policy_version: answer.get("policy_version").and_then(Value::as_u64),
        })
    }
}
