//! An exact arithmetic calculator: the [`evaluate`] function and the [`Calculator`] tool.

mod decimal;
mod error;
mod lexer;
mod number;
mod parser;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};

use crate::arguments::parse_args;

pub use error::CalcError;
pub use number::Number;
pub use parser::MAX_DEPTH;

/// Evaluates `expr` exactly: `+ - * /` with the usual precedence, parentheses, unary signs and
/// decimal literals (`-3*-(2+1)`, `1.25*4`). `−`, `×` and `÷` are accepted as `-`, `*` and `/`.
///
/// ```
/// use agentrl_tools::evaluate;
/// assert_eq!(evaluate("1/8 + 2").unwrap().to_string(), "2.125");
/// assert!(evaluate("1/(2-2)").is_err());
/// ```
pub fn evaluate(expr: &str) -> Result<Number, CalcError> {
    let tokens = lexer::tokenize(expr)?;
    parser::evaluate_tokens(&tokens)
}

/// The `calculator` tool: evaluates its `expression` argument with [`evaluate`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Calculator {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "calculator";
}

/// The arguments of the `calculator` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalculatorArgs {
    /// The expression to evaluate.
    expression: String,
}

#[async_trait]
impl Tool for Calculator {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Evaluates an arithmetic expression exactly (+ - * / and parentheses).",
            json!({
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "The expression to evaluate, e.g. \"(12 + 3) * -4 / 5\"."
                    }
                },
                "required": ["expression"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let CalculatorArgs { expression } = parse_args(args)?;
        evaluate(&expression)
            .map(|n| n.to_string())
            .map_err(|e| ToolError::Failed(e.to_string()))
    }
}
