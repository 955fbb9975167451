//! The [`ToolBox`]: registers tools, validates calls against their schemas, runs them under
//! limits and turns every result (or failure) into a `tool` message.

mod limits;
mod outcome;
mod schema;
mod text;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

use agentrl_core::{Error, Message, Result, Tool, ToolCall, ToolContext, ToolError, ToolSpec};
use jsonschema::Validator;
use serde_json::Value;

pub use limits::ToolLimits;
pub use outcome::ToolOutcome;

/// How much of malformed argument text is quoted back to the model.
const ARGUMENT_EXCERPT_CHARS: usize = 80;

/// A set of tools with per-call limits; cheap to clone (shared state behind an [`Arc`]).
#[derive(Clone, Default)]
pub struct ToolBox {
    inner: Arc<Inner>,
}

/// Shared state of a [`ToolBox`].
#[derive(Clone, Default)]
struct Inner {
    limits: ToolLimits,
    tools: Vec<Registered>,
    by_name: HashMap<String, usize>,
}

/// A tool with its spec and compiled argument schema.
#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    validator: Validator,
}

impl std::fmt::Debug for ToolBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBox")
            .field("tools", &self.names())
            .field("limits", &self.inner.limits)
            .finish()
    }
}

impl ToolBox {
    /// An empty toolbox applying `limits` to every call.
    pub fn new(limits: ToolLimits) -> Self {
        ToolBox {
            inner: Arc::new(Inner {
                limits,
                ..Inner::default()
            }),
        }
    }

    /// Adds `tool`, compiling its parameter schema; fails on an empty or duplicate name or an
    /// invalid schema.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<()> {
        let spec = tool.spec();
        let name = spec.name().to_string();
        let fail = |message: String| {
            Err(Error::Tool {
                tool: name.clone(),
                message,
            })
        };
        if name.trim().is_empty() {
            return fail("a tool name must not be empty".to_string());
        }
        if self.inner.by_name.contains_key(&name) {
            return fail("a tool with this name is already registered".to_string());
        }
        let validator = match schema::compile(&spec.function.parameters) {
            Ok(v) => v,
            Err(message) => return fail(message),
        };
        let inner = Arc::make_mut(&mut self.inner);
        inner.by_name.insert(name, inner.tools.len());
        inner.tools.push(Registered {
            tool,
            spec,
            validator,
        });
        Ok(())
    }

    /// Builder form of [`ToolBox::register`].
    pub fn with(mut self, tool: impl Tool + 'static) -> Result<Self> {
        self.register(Arc::new(tool))?;
        Ok(self)
    }

    /// Specs of the registered tools, in registration order (to show the model).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.inner.tools.iter().map(|r| r.spec.clone()).collect()
    }

    /// Names of the registered tools, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.inner
            .tools
            .iter()
            .map(|r| r.spec.function.name.clone())
            .collect()
    }

    /// The limits applied to every call.
    pub fn limits(&self) -> &ToolLimits {
        &self.inner.limits
    }

    /// Runs `call` and answers it with a `tool` message. Never fails and never panics: unknown
    /// tools, malformed or schema-violating arguments, tool errors, panics and timeouts all
    /// become an `error: ...` message plus [`ToolOutcome::error`]. Blank argument text counts as
    /// `{}`. Output beyond [`ToolLimits::max_output_chars`] is truncated.
    pub async fn dispatch(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutcome {
        let result = match self.prepare(call) {
            Ok((registered, args)) => self.run(registered, args, ctx).await,
            Err(failure) => Err(failure),
        };
        let max = self.inner.limits.max_output_chars;
        match result {
            Ok(output) => ToolOutcome {
                message: Message::tool(call.id.clone(), text::truncate_output(output, max)),
                error: None,
            },
            Err((error, hint)) => {
                let content = format!("error: {error}{hint}");
                ToolOutcome {
                    message: Message::tool(call.id.clone(), text::truncate_output(content, max)),
                    error: Some(error),
                }
            }
        }
    }

    /// Finds the tool and parses and validates the arguments; the error carries a hint for the
    /// model beyond the error's own text.
    fn prepare(&self, call: &ToolCall) -> Result<(&Registered, Value), (ToolError, String)> {
        let name = &call.function.name;
        let Some(registered) = self.inner.by_name.get(name).map(|&i| &self.inner.tools[i]) else {
            let hint = format!(" (available tools: {})", self.names().join(", "));
            return Err((ToolError::UnknownTool(name.clone()), hint));
        };
        let raw = call.function.arguments.trim();
        let args = if raw.is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(raw).map_err(|e| {
                let message = format!(
                    "arguments are not valid JSON ({e}): {:?}",
                    text::excerpt(raw, ARGUMENT_EXCERPT_CHARS)
                );
                (ToolError::InvalidArguments(message), String::new())
            })?
        };
        if let Some(violations) = schema::check(&registered.validator, &args) {
            return Err((ToolError::InvalidArguments(violations), String::new()));
        }
        Ok((registered, args))
    }

    /// Runs the tool under the time limit, turning a panic into [`ToolError::Failed`].
    async fn run(
        &self,
        registered: &Registered,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<String, (ToolError, String)> {
        let timeout = self.inner.limits.timeout;
        let mut call = registered.tool.call(args, ctx);
        let guarded = std::future::poll_fn(move |cx| {
            match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
                Ok(Poll::Ready(result)) => Poll::Ready(result),
                Ok(Poll::Pending) => Poll::Pending,
                Err(panic) => Poll::Ready(Err(ToolError::Failed(format!(
                    "the tool crashed: {}",
                    agentrl_core::panic_message(panic.as_ref())
                )))),
            }
        });
        match tokio::time::timeout(timeout, guarded).await {
            Ok(result) => result.map_err(|e| (e, String::new())),
            Err(_) => {
                let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                Err((ToolError::Timeout(ms), String::new()))
            }
        }
    }
}
