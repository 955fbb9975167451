//! [`HfChatFormat`]: a [`ChatFormat`] over a Hugging Face tokenizer and chat template.

use std::path::Path;

use agentrl_core::{Message, TokenId, ToolSpec};

use super::{ChatTemplate, GenerationDefaults, HfError, HfTokenizer, parse_tool_calls};
use crate::{ChatFormat, ParsedAction};

/// End-of-turn tokens tried, in order, when none is given: ChatML, Llama 3, Gemma.
const END_OF_TURN_CANDIDATES: [&str; 3] = ["<|im_end|>", "<|eot_id|>", "<end_of_turn>"];
/// Extra stop tokens that end an assistant message when the vocabulary has them.
const EXTRA_STOPS: [&str; 1] = ["<|eom_id|>"];
/// Text of the anchor conversation used to isolate one message's rendering.
const ANCHOR_USER: &str = "Hi";
const ANCHOR_ASSISTANT: &str = "Hello";

/// A [`ChatFormat`] for ChatML-style Hugging Face templates (Qwen, SmolLM, Hermes, ...).
///
/// - `render_prompt` is the template with `add_generation_prompt`.
/// - `render_assistant(m)` renders an anchor conversation `[user]` with the generation prompt
///   and `[user, m]` without it; the ids of `m` are what the second adds to the first, up to and
///   including the last end-of-turn token (the newline a ChatML template writes after
///   `<|im_end|>` belongs to the next continuation).
/// - `render_continuation(closed, msgs)` renders `[user, assistant]` and
///   `[user, assistant, msgs...]` with the generation prompt; the ids are the token-level suffix
///   of the longer render after the shorter one cut at its last end-of-turn token. As that
///   token is special, tokenisation never merges across it, so the suffix is the ids the full
///   render has there; it is taken after the same number of end-of-turn ids, so a template that
///   renders the anchor assistant differently once more messages follow still gets the right
///   boundary (that difference is logged at debug level, and then a full re-render differs).
///
/// Limits: this assumes the template renders each message independently of the others (true
/// for ChatML and Hermes tool templates). Templates whose rendering of a message depends on its
/// position (Qwen3 drops `<think>` blocks of earlier turns; Llama 3 writes the date in the
/// first system block) still render valid prompts, but then multi-turn prompts built from
/// continuations differ from a full re-render. Tools are only rendered by `render_prompt`.
/// Template or tokenizer failures in the trait methods are logged with `tracing` and give empty
/// ids; the `try_*` methods return them as errors.
#[derive(Debug)]
pub struct HfChatFormat {
    tokenizer: HfTokenizer,
    template: ChatTemplate,
    end_of_turn: String,
    stop_ids: Vec<TokenId>,
    generation: Option<GenerationDefaults>,
}

impl HfChatFormat {
    /// Builds the format; the end-of-turn token is the first of `<|im_end|>`, `<|eot_id|>`,
    /// `<end_of_turn>` in the vocabulary, else the template's EOS token.
    pub fn new(tokenizer: HfTokenizer, template: ChatTemplate) -> Result<Self, HfError> {
        let end_of_turn = END_OF_TURN_CANDIDATES
            .iter()
            .find(|t| tokenizer.token_id(t).is_some())
            .map(|t| t.to_string())
            .or_else(|| {
                let eos = template.eos_token();
                (!eos.is_empty() && tokenizer.token_id(eos).is_some()).then(|| eos.to_string())
            })
            .ok_or_else(|| {
                HfError::Format(
                    "no end-of-turn token: the vocabulary has none of <|im_end|>, <|eot_id|>, \
                     <end_of_turn> nor the EOS token"
                        .into(),
                )
            })?;
        Self::with_end_of_turn(tokenizer, template, &end_of_turn)
    }

    /// Builds the format with an explicit end-of-turn token (must be one id of the vocabulary).
    pub fn with_end_of_turn(
        tokenizer: HfTokenizer,
        template: ChatTemplate,
        end_of_turn: &str,
    ) -> Result<Self, HfError> {
        let eot = tokenizer.token_id(end_of_turn).ok_or_else(|| {
            HfError::Format(format!(
                "end-of-turn token {end_of_turn:?} is not in the vocabulary"
            ))
        })?;
        let mut stop_ids = vec![eot];
        for extra in EXTRA_STOPS {
            if let Some(id) = tokenizer.token_id(extra)
                && !stop_ids.contains(&id)
            {
                stop_ids.push(id);
            }
        }
        let format = HfChatFormat {
            tokenizer,
            template,
            end_of_turn: end_of_turn.to_string(),
            stop_ids,
            generation: None,
        };
        // Fail early on templates that cannot render the anchor conversations.
        format.try_render_assistant(&Message::assistant(ANCHOR_ASSISTANT))?;
        format.try_render_continuation(true, &[Message::user(ANCHOR_USER)])?;
        Ok(format)
    }

    /// Loads `tokenizer.json`, the chat template (see [`ChatTemplate::from_model_dir`]) and
    /// `generation_config.json` when present from a model directory.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, HfError> {
        let dir = dir.as_ref();
        let tokenizer = HfTokenizer::from_file(dir.join("tokenizer.json"))?;
        let template = ChatTemplate::from_model_dir(dir, None)?;
        let format = Self::new(tokenizer, template)?;
        match GenerationDefaults::from_model_dir(dir)? {
            Some(generation) => format.with_generation_defaults(generation),
            None => Ok(format),
        }
    }

    /// Attaches a model's `generation_config.json` settings: its `eos_token_id`s join the stop
    /// ids (each must be in the vocabulary).
    pub fn with_generation_defaults(
        mut self,
        generation: GenerationDefaults,
    ) -> Result<Self, HfError> {
        let vocab = self.tokenizer.vocab_size();
        for &id in &generation.eos_token_ids {
            if id as usize >= vocab {
                return Err(HfError::Config(format!(
                    "generation config: eos_token_id {id} is outside the vocabulary ({vocab} ids)"
                )));
            }
            if !self.stop_ids.contains(&id) {
                self.stop_ids.push(id);
            }
        }
        self.generation = Some(generation);
        Ok(self)
    }

    /// The model's `generation_config.json` settings, if it had one.
    pub fn generation_defaults(&self) -> Option<&GenerationDefaults> {
        self.generation.as_ref()
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &HfTokenizer {
        &self.tokenizer
    }

    /// The chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The end-of-turn token string (e.g. `<|im_end|>`).
    pub fn end_of_turn(&self) -> &str {
        &self.end_of_turn
    }

    /// [`ChatFormat::render_prompt`], with errors.
    pub fn try_render_prompt(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Vec<TokenId>, HfError> {
        let text = self.template.render(messages, tools, true)?;
        self.tokenizer.encode(&text)
    }

    /// [`ChatFormat::render_assistant`], with errors.
    pub fn try_render_assistant(&self, message: &Message) -> Result<Vec<TokenId>, HfError> {
        let base = [Message::user(ANCHOR_USER)];
        let prefix = self.template.render(&base, &[], true)?;
        let with = [Message::user(ANCHOR_USER), message.clone()];
        let full = self.template.render(&with, &[], false)?;
        let Some(added) = full.strip_prefix(prefix.as_str()) else {
            return Err(HfError::Format(format!(
                "the template's render of an assistant message does not start with its \
                 generation prompt: {prefix:?} vs {full:?}"
            )));
        };
        let Some(end) = added.rfind(&self.end_of_turn) else {
            return Err(HfError::Format(format!(
                "the template's assistant message has no {}: {added:?}",
                self.end_of_turn
            )));
        };
        let cut = prefix.len() + end + self.end_of_turn.len();
        let prefix_ids = self.tokenizer.encode(&prefix)?;
        let full_ids = self.tokenizer.encode(&full[..cut])?;
        match full_ids.strip_prefix(prefix_ids.as_slice()) {
            Some(suffix) => Ok(suffix.to_vec()),
            None => self.tokenizer.encode(&full[prefix.len()..cut]),
        }
    }

    /// [`ChatFormat::render_continuation`], with errors.
    pub fn try_render_continuation(
        &self,
        generation_closed: bool,
        messages: &[Message],
    ) -> Result<Vec<TokenId>, HfError> {
        let mut conversation = vec![
            Message::user(ANCHOR_USER),
            Message::assistant(ANCHOR_ASSISTANT),
        ];
        let before = self.template.render(&conversation, &[], false)?;
        conversation.extend_from_slice(messages);
        let after = self.template.render(&conversation, &[], true)?;
        let Some(end) = before.rfind(&self.end_of_turn) else {
            return Err(HfError::Format(format!(
                "the template's assistant message has no {}: {before:?}",
                self.end_of_turn
            )));
        };
        let before_ids = self
            .tokenizer
            .encode(&before[..end + self.end_of_turn.len()])?;
        let after_ids = self.tokenizer.encode(&after)?;
        // The end-of-turn token is special, so ids split at it exactly as the text does: the
        // continuation starts after as many end-of-turn ids as the shorter render has.
        let eot = self.stop_ids[0];
        let turns = before_ids.iter().filter(|&&id| id == eot).count();
        let Some(pos) = after_ids
            .iter()
            .enumerate()
            .filter(|(_, id)| **id == eot)
            .nth(turns.saturating_sub(1))
            .map(|(i, _)| i)
        else {
            return Err(HfError::Format(format!(
                "rendering more messages dropped the end of the assistant message: {after:?}"
            )));
        };
        if after_ids[..=pos] != before_ids[..] {
            tracing::debug!(
                "the chat template renders earlier messages differently once more follow; \
                 continuations will not match a full re-render"
            );
        }
        let mut out = Vec::new();
        if !generation_closed {
            out.push(eot);
        }
        out.extend_from_slice(&after_ids[pos + 1..]);
        Ok(out)
    }

    /// Decodes generated ids and parses them; errors of decoding are reported in the result.
    fn parse(&self, ids: &[TokenId], call_id_prefix: &str) -> ParsedAction {
        let mut errors: Vec<String> = Vec::new();
        let body = match ids.split_last() {
            Some((last, rest)) if self.stop_ids.contains(last) => rest,
            _ => {
                errors.push(format!("generation ended before {}", self.end_of_turn));
                ids
            }
        };
        let text = match self.tokenizer.decode(body) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e.to_string());
                String::new()
            }
        };
        for marker in [self.end_of_turn.as_str(), "<|im_start|>"] {
            if text.contains(marker) {
                errors.push(format!("unexpected {marker} inside the message"));
            }
        }
        let mut action = parse_tool_calls(&text).into_action(call_id_prefix);
        if let Some(e) = action.error.take() {
            errors.push(e);
        }
        action.error = (!errors.is_empty()).then(|| errors.join("; "));
        action
    }
}

/// Logs a rendering failure of a trait method and gives empty ids.
fn or_log(result: Result<Vec<TokenId>, HfError>, what: &str) -> Vec<TokenId> {
    result.unwrap_or_else(|e| {
        tracing::error!("HfChatFormat::{what} failed: {e}");
        Vec::new()
    })
}

impl ChatFormat for HfChatFormat {
    fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    fn render_prompt(&self, messages: &[Message], tools: &[ToolSpec]) -> Vec<TokenId> {
        or_log(self.try_render_prompt(messages, tools), "render_prompt")
    }

    fn render_continuation(&self, generation_closed: bool, messages: &[Message]) -> Vec<TokenId> {
        or_log(
            self.try_render_continuation(generation_closed, messages),
            "render_continuation",
        )
    }

    fn render_assistant(&self, message: &Message) -> Vec<TokenId> {
        or_log(self.try_render_assistant(message), "render_assistant")
    }

    fn parse_assistant(&self, ids: &[TokenId], call_id_prefix: &str) -> ParsedAction {
        self.parse(ids, call_id_prefix)
    }

    fn stop_ids(&self) -> Vec<TokenId> {
        self.stop_ids.clone()
    }

    fn decode(&self, ids: &[TokenId]) -> String {
        self.tokenizer
            .decode(ids)
            .unwrap_or_else(|e| format!("<undecodable: {e}>"))
    }
}
