//! The `propose` and `accept` tools of `negotiation`, acting for the seat whose step is
//! running, on the table they share with the session.

use std::sync::{Arc, Mutex};

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::deal::{ITEMS, Move, Seat, Table};
use crate::locking::lock;

/// The table, the seat acting in the current step, and moves not yet reported.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The negotiation, while an episode runs.
    pub(crate) table: Option<Table>,
    /// The seat whose tool calls are being run.
    pub(crate) actor: Option<Seat>,
    /// Moves (mover, description) not yet reported to the other seat.
    pub(crate) events: Vec<(Seat, String)>,
}

/// Applies the acting seat's move for a tool.
fn act(shared: &Mutex<Shared>, m: Move) -> std::result::Result<String, ToolError> {
    let mut shared = lock(shared);
    let actor = shared
        .actor
        .ok_or_else(|| ToolError::Failed("no seat is acting".into()))?;
    let table = shared
        .table
        .as_mut()
        .ok_or_else(|| ToolError::Failed("no negotiation: the episode has not started".into()))?;
    let text = table.apply(actor, m).map_err(ToolError::InvalidArguments)?;
    shared.events.push((actor, text.clone()));
    Ok(text)
}

/// The `propose` tool: offer a split, naming what the acting seat keeps.
#[derive(Debug)]
pub struct ProposeTool {
    pub(crate) shared: Arc<Mutex<Shared>>,
}

/// The `accept` tool: take the other seat's standing offer.
#[derive(Debug)]
pub struct AcceptTool {
    pub(crate) shared: Arc<Mutex<Shared>>,
}

#[async_trait]
impl Tool for ProposeTool {
    fn spec(&self) -> ToolSpec {
        let count = json!({ "type": "integer", "minimum": 0 });
        let properties: serde_json::Map<String, Value> = ITEMS
            .iter()
            .map(|i| (i.to_string(), count.clone()))
            .collect();
        ToolSpec::function(
            "propose",
            "Propose a split: how many of each item you keep; the other side gets the rest.",
            json!({
                "type": "object",
                "properties": properties,
                "required": ITEMS,
                "additionalProperties": false
            }),
        )
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &ToolContext,
    ) -> std::result::Result<String, ToolError> {
        let mut keep = [0u32; 3];
        for (slot, item) in keep.iter_mut().zip(ITEMS) {
            let n = args
                .get(item)
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok());
            *slot = n.ok_or_else(|| {
                ToolError::InvalidArguments(format!("`{item}` must be a count from 0 up"))
            })?;
        }
        act(&self.shared, Move::Propose(keep))
    }
}

#[async_trait]
impl Tool for AcceptTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            "accept",
            "Accept the other side's standing offer; the negotiation ends with that split.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        )
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &ToolContext,
    ) -> std::result::Result<String, ToolError> {
        act(&self.shared, Move::Accept)
    }
}
