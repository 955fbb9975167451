//! [`JudgeBackend`]: the model an [`LlmJudge`](crate::LlmJudge) asks, text in, text out. It sits
//! beside `judge` (not inside it) because building rewards needs it too.

use agentrl_core::Result;
use async_trait::async_trait;

/// A model that answers a prompt with text: a local policy, a served LLM, an HTTP endpoint.
#[async_trait]
pub trait JudgeBackend: Send + Sync {
    /// The model's answer to `prompt`.
    async fn complete(&self, prompt: &str) -> Result<String>;
}
