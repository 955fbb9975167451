//! `negotiation`: two seats (alice and bob) split books, hats and balls they value privately,
//! turn by turn with `propose` and `accept` tools. Either seat can be the policy or the
//! scripted partner; one session carries both, and messages name the seat they are for.

mod deal;
mod demonstrator;
mod env;
mod task;
mod tools;

use agentrl_core::{Env, Error, Message, Result, Split, Task, ToolCall};
use serde_json::json;

pub use deal::{Deal, ITEMS, Move, Seat, Split3, TOTAL_VALUE, Table, split_text};
pub use demonstrator::{NEGOTIATION_DEMONSTRATOR_KNOBS, negotiation_demonstrator};
pub use env::{Control, NegotiationEnv, status_line};
pub use task::{MAX_PROPOSALS, deal_of, generate, to_task};
pub use tools::{AcceptTool, ProposeTool};

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};
use crate::wrappers::TurnLimit;

/// Registry id of the env.
pub const NEGOTIATION_ID: &str = "negotiation";

/// Steps allowed per episode (both seats' steps count when both are policies).
pub const NEGOTIATION_MAX_TURNS: usize = 20;

/// The `negotiation` factory: `seed` selects the task set (default `0`), `controls` who
/// plays alice and bob (default: the policy plays alice, the scripted partner bob).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiation {
    /// Seed of the task generator.
    pub seed: u64,
    /// Who plays alice (`[0]`) and bob (`[1]`).
    pub controls: [Control; 2],
}

impl Default for Negotiation {
    fn default() -> Self {
        Negotiation {
            seed: 0,
            controls: [Control::Policy, Control::Scripted],
        }
    }
}

impl Negotiation {
    /// The factory for the task set of `seed` with seats played by `controls`; an
    /// [`Error::Config`] unless at least one seat is a policy.
    pub fn new(seed: u64, controls: [Control; 2]) -> Result<Self> {
        if !controls.contains(&Control::Policy) {
            return Err(Error::Config(
                "negotiation: at least one seat must be played by the policy".into(),
            ));
        }
        Ok(Negotiation { seed, controls })
    }
}

impl EnvFactory for Negotiation {
    fn id(&self) -> &str {
        NEGOTIATION_ID
    }

    fn description(&self) -> &str {
        "split items with private values with a partner by proposing and accepting (two seats)"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        to_task(&generate(self.seed, split, index), split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(TurnLimit::new(
            NegotiationEnv::new(self.controls),
            NEGOTIATION_MAX_TURNS,
        ))
    }

    fn max_turns(&self) -> usize {
        NEGOTIATION_MAX_TURNS
    }

    /// The expert is deterministic, so `seed` is not used.
    fn solver(&self, _seed: u64) -> Box<dyn Solver> {
        Box::new(NegotiationExpert)
    }

    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        NEGOTIATION_DEMONSTRATOR_KNOBS
    }

    /// See [`negotiation_demonstrator`].
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        Ok(Box::new(negotiation_demonstrator(seed, knobs)?))
    }
}

/// Reads the last `Your turn (seat): K of N proposals made; ...` line of `history`: the seat,
/// the proposal count and the offer that seat has (counts of each item).
fn read_status(history: &[Message]) -> Option<(Seat, u32, Option<Split3>)> {
    let line = history
        .iter()
        .rev()
        .flat_map(|m| m.text().lines().rev())
        .find(|l| l.starts_with("Your turn ("))?;
    let (seat, rest) = line.strip_prefix("Your turn (")?.split_once("): ")?;
    let seat = Seat::parse(seat)?;
    let proposals = rest.split_whitespace().next()?.parse().ok()?;
    let offer = match rest.split_once("you get ") {
        None => None,
        Some((_, items)) => {
            let counts: Option<Vec<u32>> = items
                .trim_end_matches('.')
                .split(", ")
                .map(|part| part.rsplit(' ').next()?.parse().ok())
                .collect();
            let counts = counts?;
            Some([*counts.first()?, *counts.get(1)?, *counts.get(2)?])
        }
    };
    Some((seat, proposals, offer))
}

/// The reference solver: knows both seats' values and the partner's conceding schedule from
/// the task, reads whose turn it is, the proposal count and the standing offer from the last
/// status line, and plays [`Table::expert_move`] for that seat (naming the seat in `name`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NegotiationExpert;

impl Solver for NegotiationExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        next_move(task, history, false)
    }
}

/// The move of a scripted negotiator on `task` after `history`: the reference move, except
/// that with `accept_any` it accepts whatever offer stands.
fn next_move(task: &Task, history: &[Message], accept_any: bool) -> Message {
    let deal = match deal_of(task) {
        Ok(d) => d,
        Err(e) => return Message::assistant(format!("I cannot read this task: {e}")),
    };
    let Some((seat, proposals, offer)) = read_status(history) else {
        return Message::assistant("I cannot tell whose turn it is.");
    };
    let mut table = Table::new(deal);
    table.turn = seat;
    table.proposals = proposals;
    table.offer = offer.map(|mine| (seat.other(), table.deal.rest(&mine)));
    let id = format!("call_{}", history.len());
    let choice = match table.offer_to(seat) {
        Some(_) if accept_any => Move::Accept,
        _ => table.expert_move(seat),
    };
    let call = match choice {
        Move::Accept => ToolCall::new(id, "accept", &json!({})),
        Move::Propose(keep) => {
            let args = json!({ ITEMS[0]: keep[0], ITEMS[1]: keep[1], ITEMS[2]: keep[2] });
            ToolCall::new(id, "propose", &args)
        }
    };
    let mut message = Message::assistant_tool_calls(None, vec![call]);
    message.name = Some(seat.name().to_string());
    message
}
