//! # agentrl-core
//!
//! The vocabulary every AgentRL crate speaks, and nothing else: chat [`Message`]s and
//! [`ToolSpec`]s in the OpenAI JSON shape; the four traits [`Env`], [`Policy`], [`Tool`] and
//! [`RewardFn`]; token-exact [`Trajectory`] records; sampling parameters; and the one
//! [`Error`] type. It depends on no model runtime, so any layer can be implemented against it.
//!
//! ```
//! use agentrl_core::{Message, Role, ToolCall};
//!
//! let call = ToolCall::new("call_1", "calculator", &serde_json::json!({"expression": "6*7"}));
//! let msg = Message::assistant_tool_calls(None, vec![call]);
//! let json = serde_json::to_string(&msg).unwrap();
//! let back: Message = serde_json::from_str(&json).unwrap();
//! assert_eq!(back.role, Role::Assistant);
//! assert_eq!(back.tool_calls[0].function.parse_arguments().unwrap()["expression"], "6*7");
//! ```

#![warn(missing_docs)]

pub mod env;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod message;
pub mod packing;
pub mod policy;
pub mod reward;
pub mod rng;
pub mod secret;
pub mod tool;
pub mod trajectory;

pub use env::{Env, Observation, Split, Step, StepInfo, Task};
pub use error::{Error, Result, panic_message, with_causes};
pub use message::{FunctionCall, FunctionSpec, Message, Role, ToolCall, ToolSpec};
pub use policy::{FinishReason, Generation, GenerationRequest, Policy, SamplingParams, TokenId};
pub use reward::{RewardBreakdown, RewardFn};
pub use rng::{SeededRng, stable_hash};
pub use secret::same_secret;
pub use tool::{Tool, ToolContext, ToolError};
pub use trajectory::{
    BadLine, Outcome, Trajectory, Turn, read_jsonl, read_jsonl_from, write_jsonl,
};
