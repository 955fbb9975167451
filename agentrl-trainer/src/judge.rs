//! Judge backends for [`agentrl_reward::LlmJudge`] built on AgentRL policies.
//!
//! [`PolicyJudge`] turns any [`Policy`] with its [`ChatFormat`] into a
//! [`JudgeBackend`]: the judge prompt becomes one user message, the policy answers greedily,
//! and the answer's text goes back to the judge. [`tch_judge`] loads such a policy from a
//! checkpoint of the run's model shape.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentrl_core::{Error, GenerationRequest, Message, Policy, Result, SamplingParams};
use agentrl_policy::{ChatFormat, TchPolicy, TinyGpt};
use agentrl_reward::JudgeBackend;
use async_trait::async_trait;
use tch::nn;

use crate::config::ModelConfig;

/// Tokens a judge may write by default: enough for "Score: 7/10" and a few words.
pub const DEFAULT_JUDGE_MAX_NEW_TOKENS: usize = 24;

/// A [`JudgeBackend`] answering with a policy: greedy decoding of the prompt rendered as a
/// user message, stopped at the format's stop ids, decoded as the assistant message's text.
pub struct PolicyJudge {
    policy: Arc<dyn Policy>,
    format: Arc<dyn ChatFormat>,
    max_new_tokens: usize,
    context_len: Option<usize>,
    too_long: AtomicU64,
}

impl PolicyJudge {
    /// A judge generating at most `max_new_tokens` (at least 1) tokens per answer.
    pub fn new(
        policy: Arc<dyn Policy>,
        format: Arc<dyn ChatFormat>,
        max_new_tokens: usize,
    ) -> Self {
        PolicyJudge {
            policy,
            format,
            max_new_tokens: max_new_tokens.max(1),
            context_len: None,
            too_long: AtomicU64::new(0),
        }
    }

    /// Rejects prompts that leave the model (of context `context_len` tokens) no room to
    /// answer, with an error that says so, instead of letting it answer nothing.
    pub fn with_context_len(mut self, context_len: usize) -> Self {
        self.context_len = Some(context_len);
        self
    }

    /// Prompts rejected so far because they did not fit the context.
    pub fn prompts_too_long(&self) -> u64 {
        self.too_long.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl JudgeBackend for PolicyJudge {
    async fn complete(&self, prompt: &str) -> Result<String> {
        let prompt_ids = self.format.render_prompt(&[Message::user(prompt)], &[]);
        if let Some(context) = self.context_len
            && prompt_ids.len() >= context
        {
            self.too_long.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Policy(format!(
                "the judge prompt has {} tokens but the judge model's context is {context}; \
                 lower max_transcript_chars or shorten the rubric",
                prompt_ids.len()
            )));
        }
        let mut params = SamplingParams::greedy(self.max_new_tokens);
        params.stop_ids = self.format.stop_ids();
        let generations = self
            .policy
            .generate(vec![GenerationRequest::new(prompt_ids, params)])
            .await?;
        let generation = generations
            .into_iter()
            .next()
            .ok_or_else(|| Error::Policy("the judge policy returned no generation".into()))?;
        let parsed = self.format.parse_assistant(&generation.ids, "judge_");
        Ok(parsed.message.text().to_string())
    }
}

/// A [`PolicyJudge`] over a [`TchPolicy`] of the model shape `model`, loaded from the
/// safetensors `checkpoint`, with its context limit set from the model.
pub fn tch_judge(
    model: &ModelConfig,
    format: Arc<dyn ChatFormat>,
    checkpoint: &Path,
    seed: u64,
    max_new_tokens: usize,
) -> Result<PolicyJudge> {
    let mut vs = nn::VarStore::new(agentrl_policy::device::default_device());
    let gpt = TinyGpt::new(&vs.root(), model.gpt(format.vocab_size())?)?;
    vs.load(checkpoint).map_err(|e| {
        Error::Config(format!(
            "loading the judge checkpoint {} (it must hold weights of the run's [model] shape): {e}",
            checkpoint.display()
        ))
    })?;
    let policy = TchPolicy::spawn(vs, gpt, 64, seed)?;
    Ok(PolicyJudge::new(Arc::new(policy), format, max_new_tokens)
        .with_context_len(model.max_seq_len))
}
