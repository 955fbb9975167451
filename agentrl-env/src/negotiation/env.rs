//! The `negotiation` session: two seats in one session, each played by the policy or by the
//! scripted partner. Every message the env sends carries the addressed seat in `name`, and an
//! action's `name` says which seat acts (it may be left out while one seat is a policy).

use std::sync::{Arc, Mutex};

use agentrl_core::{Env, Error, Message, Observation, Result, Step, Task, ToolContext};
use agentrl_tools::{ToolBox, ToolLimits};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::NEGOTIATION_ID;
use super::deal::{Seat, Table, split_text};
use super::task::deal_of;
use super::tools::{AcceptTool, ProposeTool, Shared};
use crate::locking::lock;
use crate::session::{continue_step, invalid_step, run_tool_calls, wrong_role};
use crate::tool_env::SessionTools;

/// What to do instead of a malformed action.
const HINT: &str = "on your turn call propose (the items you keep) or accept";

/// Who plays a seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The policy being trained or evaluated (its actions come through `step`).
    Policy,
    /// The env's scripted partner.
    Scripted,
}

/// `message` addressed to `seat`.
fn to_seat(mut message: Message, seat: Seat) -> Message {
    message.name = Some(seat.name().to_string());
    message
}

/// The line telling `seat` it is its turn, with the proposal count and the offer it has.
pub fn status_line(table: &Table, seat: Seat) -> String {
    let offer = match table.offer_to(seat) {
        Some(mine) => format!(
            "{}'s offer on the table: you get {}.",
            seat.other().name(),
            split_text(&mine)
        ),
        None => "no offer on the table.".to_string(),
    };
    format!(
        "Your turn ({}): {} of {} proposals made; {offer}",
        seat.name(),
        table.proposals,
        table.deal.max_proposals
    )
}

/// What `seat` is told at the start.
fn briefing(table: &Table, seat: Seat) -> String {
    let deal = &table.deal;
    let other = seat.other().name();
    format!(
        "You are {}, negotiating with {other} over {}. Your value per item: {} (worth 10 in all; \
         {other}'s values are private). On your turn call propose with how many of each item \
         you keep (the rest goes to {other}), or accept to take {other}'s standing offer. At \
         most {} proposals in all; if the last one is not accepted, nobody gets anything. Your \
         reward is the value you end with, divided by 10.",
        seat.name(),
        split_text(&deal.counts),
        split_text(&deal.values[seat.index()]),
        deal.max_proposals
    )
}

/// One `negotiation` session, without turn limit (the factory adds it).
pub struct NegotiationEnv {
    shared: Arc<Mutex<Shared>>,
    tools: SessionTools,
    controls: [Control; 2],
}

impl NegotiationEnv {
    /// A session where `controls[0]` plays alice and `controls[1]` bob; at least one seat
    /// must be [`Control::Policy`], otherwise `reset` fails.
    pub fn new(controls: [Control; 2]) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let built = ToolBox::new(ToolLimits::default())
            .with(ProposeTool {
                shared: Arc::clone(&shared),
            })
            .and_then(|b| {
                b.with(AcceptTool {
                    shared: Arc::clone(&shared),
                })
            })
            .map_err(|e| format!("cannot set up the tools: {e}"));
        NegotiationEnv {
            shared,
            tools: SessionTools::new(NEGOTIATION_ID, built),
            controls,
        }
    }

    fn control(&self, seat: Seat) -> Control {
        self.controls[seat.index()]
    }

    /// Plays the scripted seats while it is their turn, then turns the pending events (and
    /// the status or final result) into messages for the policy seats; `intro` adds the
    /// briefing.
    fn advance(&self, intro: bool) -> Result<Vec<Message>> {
        let mut shared = lock(&self.shared);
        let Shared { table, events, .. } = &mut *shared;
        let table = table
            .as_mut()
            .ok_or_else(|| Error::env(NEGOTIATION_ID, "no negotiation is running"))?;
        while table.result.is_none() && self.control(table.turn) == Control::Scripted {
            let seat = table.turn;
            let text = table
                .apply(seat, table.scripted_move(seat))
                .map_err(|why| {
                    Error::env(
                        NEGOTIATION_ID,
                        format!("scripted {} failed: {why}", seat.name()),
                    )
                })?;
            events.push((seat, text));
        }
        let mut messages = Vec::new();
        for seat in Seat::BOTH
            .into_iter()
            .filter(|&s| self.control(s) == Control::Policy)
        {
            let mut lines: Vec<String> = Vec::new();
            if intro {
                lines.push(briefing(table, seat));
            }
            lines.extend(
                events
                    .iter()
                    .filter(|(from, _)| *from != seat)
                    .map(|(_, t)| t.clone()),
            );
            if table.result.is_some() {
                lines.push(format!(
                    "Negotiation over: you end with value {} of 10.",
                    table.value_of(seat)
                ));
            } else if table.turn == seat {
                lines.push(status_line(table, seat));
            }
            if !lines.is_empty() {
                messages.push(to_seat(Message::user(lines.join("\n")), seat));
            }
        }
        events.clear();
        Ok(messages)
    }
}

#[async_trait]
impl Env for NegotiationEnv {
    fn id(&self) -> &str {
        NEGOTIATION_ID
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        *lock(&self.shared) = Shared::default();
        if !self.controls.contains(&Control::Policy) {
            return Err(Error::Config(
                "negotiation: at least one seat must be played by the policy".into(),
            ));
        }
        let tools = self.tools.get()?.specs();
        lock(&self.shared).table = Some(Table::new(deal_of(task)?));
        let messages = self.advance(true)?;
        Ok(Observation { messages, tools })
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        let turn = match &lock(&self.shared).table {
            Some(t) if t.result.is_none() => t.turn,
            _ => return Err(Error::env(NEGOTIATION_ID, "step called outside an episode")),
        };
        let actor = match action.name.as_deref().map(|n| (n, Seat::parse(n))) {
            None => turn,
            Some((_, Some(seat))) if self.control(seat) == Control::Policy => seat,
            Some((_, Some(seat))) => {
                return Ok(invalid_step(
                    &format!("{} is played by the env", seat.name()),
                    HINT,
                ));
            }
            Some((name, None)) => {
                return Ok(invalid_step(
                    &format!("unknown seat `{name}` (seats: alice, bob)"),
                    HINT,
                ));
            }
        };
        let invalid = |reason: &str| {
            let mut step = invalid_step(reason, HINT);
            step.messages = step
                .messages
                .into_iter()
                .map(|m| to_seat(m, actor))
                .collect();
            step
        };
        if actor != turn {
            return Ok(invalid(&format!(
                "it is {}'s turn, not {}'s",
                turn.name(),
                actor.name()
            )));
        }
        if let Some(reason) = wrong_role(action) {
            return Ok(invalid(&reason));
        }
        if action.tool_calls.is_empty() {
            return Ok(invalid(if action.text().trim().is_empty() {
                "empty message"
            } else {
                "no tool call"
            }));
        }
        let toolbox = self.tools.get()?;
        lock(&self.shared).actor = Some(actor);
        let shared = Arc::clone(&self.shared);
        let moved = || {
            lock(&shared)
                .table
                .as_ref()
                .is_none_or(|t| t.result.is_some() || t.turn != actor)
        };
        let (replies, mut info) = run_tool_calls(
            NEGOTIATION_ID,
            toolbox,
            &ToolContext::default(),
            action,
            moved,
        )
        .await?;
        lock(&self.shared).actor = None;
        let mut messages: Vec<Message> = replies.into_iter().map(|m| to_seat(m, actor)).collect();
        messages.extend(self.advance(false)?);
        let shared = lock(&self.shared);
        let Some(table) = shared.table.as_ref().filter(|t| t.result.is_some()) else {
            let turn = shared.table.as_ref().map_or(turn, |t| t.turn);
            info.extra.insert("turn".into(), json!(turn.name()));
            return Ok(continue_step(messages, info));
        };
        let score = table.score(actor);
        info.success = Some(score >= 0.5);
        info.score = Some(score);
        info.extra
            .insert("deal".into(), json!(matches!(table.result, Some(Some(_)))));
        let scores: serde_json::Map<String, Value> = Seat::BOTH
            .iter()
            .map(|s| (s.name().to_string(), json!(table.score(*s))))
            .collect();
        info.extra
            .insert("seat_scores".into(), Value::Object(scores));
        Ok(Step {
            messages,
            reward: score,
            terminated: true,
            truncated: false,
            info,
        })
    }
}
