//! Full-text search: a BM25 [`SearchIndex`] over titled documents (tantivy, in memory) and the
//! [`Search`] tool that returns ranked results with title, document id and snippet.
//!
//! ```
//! use std::sync::Arc;
//! use agentrl_tools::{Search, SearchDocument, SearchIndex, SearchLimits};
//!
//! let docs = vec![
//!     SearchDocument { id: "d1".into(), title: "Ostrel".into(), body: "Ostrel lies on a river.".into() },
//!     SearchDocument { id: "d2".into(), title: "Brask".into(), body: "Brask makes lamps.".into() },
//! ];
//! let index = Arc::new(SearchIndex::build(&docs).unwrap());
//! let hits = index.search("lamps", 5, 100).unwrap();
//! assert_eq!(hits[0].id, "d2");
//! let _tool = Search::new(index, SearchLimits::default());
//! ```

mod index;
mod render;

use std::sync::Arc;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::arguments::parse_args;

pub use index::{SearchDocument, SearchError, SearchHit, SearchIndex};
pub use render::render_hits;

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 300;

/// Limits of the [`Search`] tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Results returned when the call gives no `limit`.
    pub default_results: usize,
    /// Largest `limit` a call may ask for.
    pub max_results: usize,
    /// Longest snippet per result, in characters.
    pub snippet_chars: usize,
    /// Longest tool output, in characters; whole results are left out to stay within it.
    pub max_output_chars: usize,
}

impl Default for SearchLimits {
    /// 3 results by default, at most 10, snippets of 200 characters, 2000 characters in all.
    fn default() -> Self {
        SearchLimits {
            default_results: 3,
            max_results: 10,
            snippet_chars: 200,
            max_output_chars: 2000,
        }
    }
}

/// The `search` tool: ranks the documents of a shared [`SearchIndex`] for a query (BM25) and
/// shows the best ones with title, id and snippet.
#[derive(Debug, Clone)]
pub struct Search {
    index: Arc<SearchIndex>,
    limits: SearchLimits,
}

impl Search {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "search";

    /// A tool over `index` (shared, not copied) with `limits`.
    pub fn new(index: Arc<SearchIndex>, limits: SearchLimits) -> Self {
        Search { index, limits }
    }

    /// The tool output for `query` with at most `limit` results (blocking).
    pub fn run(&self, query: &str, limit: usize) -> Result<String, SearchError> {
        let hits = self.index.search(query, limit, self.limits.snippet_chars)?;
        Ok(render_hits(query, &hits, self.limits.max_output_chars))
    }
}

/// The arguments of the `search` tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to search for.
    query: String,
    /// How many results to return (the tool's default when left out).
    limit: Option<u64>,
}

/// A [`SearchError`] as a tool error: the caller's query errors are invalid arguments.
fn tool_error(e: SearchError) -> ToolError {
    match e {
        SearchError::Index(_) => ToolError::Failed(e.to_string()),
        _ => ToolError::InvalidArguments(e.to_string()),
    }
}

#[async_trait]
impl Tool for Search {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            "Full-text search over the document collection; returns the best-matching documents \
             with title, id and a snippet.",
            json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "maxLength": MAX_QUERY_CHARS,
                        "description": "Words to search for; \"double quotes\" match a phrase."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.limits.max_results,
                        "description": format!(
                            "How many results to return (default {}).",
                            self.limits.default_results
                        )
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let SearchArgs { query, limit } = parse_args(args)?;
        let limit = match limit {
            None => self.limits.default_results,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| (1..=self.limits.max_results).contains(n))
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "`limit` must be an integer from 1 to {}",
                        self.limits.max_results
                    ))
                })?,
        };
        let tool = self.clone();
        tokio::task::spawn_blocking(move || tool.run(&query, limit))
            .await
            .map_err(|e| ToolError::Failed(format!("search task failed: {e}")))?
            .map_err(tool_error)
    }
}
