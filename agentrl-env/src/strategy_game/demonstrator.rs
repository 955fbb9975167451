//! The imperfect `strategy-game` demonstrator: the reference solver, or, as a habit decided
//! once per game, a player who pursues its own plan and never blocks the opponent's wins.

use agentrl_core::{Message, Result, SeededRng, Task};

use super::board::{Board, Piece};
use super::search::{best_column, scored_moves, winning_column};
use super::{EXPERT_DEPTH, STRATEGY_GAME_ID, next_move};
use crate::demonstrator::{
    DemonstratorKnobs, KnobDoc, PerTaskChoice, probability_knob, reject_unknown_knobs,
};
use crate::factory::Solver;

/// Knob: probability of ignoring the opponent's threats for a whole game.
const IGNORE_THREATS_PROB: &str = "ignore_threats_prob";

/// The knobs of [`StrategyDemonstrator::from_knobs`] (name, doc).
pub const STRATEGY_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    IGNORE_THREATS_PROB,
    "probability, on a game, of ignoring the opponent's threats: whenever the opponent could \
     win with its next piece and it cannot win at once itself, it plays its best other column \
     instead of blocking (default 0)",
)];

/// A demonstrator for supervised warm starts whose mistake is a habit, so that a cloned
/// policy keeps it under greedy decoding and RL has something to unlearn.
///
/// Once per game (on its first turn) it decides, with probability `ignore_threats_prob`, to
/// ignore threats for the whole game: it searches like the reference solver, but when the
/// opponent has a column that wins at once and it has none itself, it plays the best-scored
/// column other than that one (the block only when no other column is legal). Against the
/// default opponent, which takes every win it is given, such a game is lost as soon as a
/// threat stands. Otherwise it plays like [`super::StrategyExpert`].
#[derive(Debug, Clone)]
pub struct StrategyDemonstrator {
    /// Probability of ignoring threats on a game.
    pub ignore_threats_prob: f64,
    /// Search depth in plies (the reference solver's).
    pub depth: u8,
    /// Source of all its random choices.
    pub rng: SeededRng,
    /// For the game in progress (by task id): whether it ignores threats.
    plan: PerTaskChoice<bool>,
}

impl StrategyDemonstrator {
    /// A demonstrator ignoring threats with probability `ignore_threats_prob`, seeded by
    /// `seed`.
    pub fn new(seed: u64, ignore_threats_prob: f64) -> Self {
        StrategyDemonstrator {
            ignore_threats_prob,
            depth: EXPERT_DEPTH,
            rng: SeededRng::new(seed),
            plan: PerTaskChoice::default(),
        }
    }

    /// The demonstrator that `knobs` describe (see [`STRATEGY_DEMONSTRATOR_KNOBS`]), seeded
    /// by `seed`; a missing knob turns its habit off, and an unknown knob or a value outside
    /// `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
    pub fn from_knobs(seed: u64, knobs: &DemonstratorKnobs) -> Result<Self> {
        reject_unknown_knobs(STRATEGY_GAME_ID, knobs, STRATEGY_DEMONSTRATOR_KNOBS)?;
        let ignore = probability_knob(STRATEGY_GAME_ID, knobs, IGNORE_THREATS_PROB, 0.0)?;
        Ok(StrategyDemonstrator::new(seed, ignore))
    }

    /// Whether to ignore threats on `task`: decided on the first turn, remembered after.
    fn ignores_threats(&mut self, task: &Task, history: &[Message]) -> bool {
        self.plan
            .decide(task, history, || self.rng.chance(self.ignore_threats_prob))
    }
}

/// The column (0-based) the opponent of `agent` would win with at once on `board`, when
/// `agent` has no win of its own there: the threat a careful player blocks.
fn threat(board: &Board, agent: Piece) -> Option<usize> {
    if winning_column(board, agent).is_some() {
        return None;
    }
    winning_column(board, agent.other())
}

/// The best column for `agent` by a search to `depth`, never the block of a threat when
/// another column is legal (centre-most among equals, like [`best_column`]).
fn ignoring_threats(board: &Board, agent: Piece, depth: u8) -> Option<usize> {
    let Some(block) = threat(board, agent) else {
        return best_column(board, agent, depth);
    };
    let others: Vec<(usize, i64)> = scored_moves(board, agent, depth)
        .into_iter()
        .filter(|&(column, _)| column != block)
        .collect();
    let Some(best) = others.iter().map(|&(_, score)| score).max() else {
        return Some(block);
    };
    others
        .iter()
        .find(|&&(_, score)| score == best)
        .map(|&(column, _)| column)
}

impl Solver for StrategyDemonstrator {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let ignore = self.ignores_threats(task, history);
        let depth = self.depth;
        next_move(task, history, |board, agent| {
            if ignore {
                ignoring_threats(board, agent, depth)
            } else {
                best_column(board, agent, depth)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable, play, success_rates,
    };
    use crate::factory::{EnvFactory, SolverEpisode};
    use crate::strategy_game::{StrategyGame, game_of};
    use agentrl_core::{Role, Split};
    use serde_json::json;

    /// Number of train games the rates are measured on.
    const GAMES: u64 = 80;

    /// For each of the agent's moves in `episode` (game `index`): the threat it faced, if
    /// any, and the column (0-based) it played.
    fn moves(index: u64, episode: &SolverEpisode) -> Vec<(Option<usize>, usize)> {
        let task = StrategyGame::default().task(Split::Train, index);
        let game = game_of(&task).expect("a generated game");
        let mut board = game.board();
        let mut out = Vec::new();
        for message in &episode.messages {
            if let Some(seen) = Board::parse_last(message.text()) {
                board = seen;
            }
            if message.role != Role::Assistant {
                continue;
            }
            for call in &message.tool_calls {
                let args: serde_json::Value =
                    serde_json::from_str(&call.function.arguments).expect("json arguments");
                let column = args["column"].as_u64().expect("a column") as usize - 1;
                out.push((threat(&board, game.agent()), column));
            }
        }
        out
    }

    #[tokio::test]
    async fn ignoring_threats_loses_the_games_where_one_stands() {
        let factory = StrategyGame::default();
        let reference = play(&factory, json!({}), 2, GAMES).await;
        let on = play(&factory, json!({ IGNORE_THREATS_PROB: 1.0 }), 2, GAMES).await;
        // The games where a threat stood before the careless player and it lost for it.
        let mut threatened = Vec::new();
        for (index, episode) in (0..).zip(&on) {
            let played = moves(index, episode);
            let faced = played.iter().any(|(t, _)| t.is_some());
            for (threat, column) in &played {
                assert!(threat.is_none_or(|t| t != *column), "game {index} blocked");
            }
            assert!(
                !(faced && episode.success),
                "game {index} won past a threat"
            );
            threatened.push(faced && reference[index as usize].success);
        }
        let affected = |index: u64| threatened[index as usize];
        let share = threatened.iter().filter(|&&t| t).count();
        assert!(share >= 12, "too few games to tell: {share}/{GAMES}");
        let (expert, _) = success_rates(&reference, affected);
        let (all, hit) = success_rates(&on, affected);
        assert_eq!(hit, 0.0);
        assert!(all + 0.15 < expert, "{all} vs {expert}");
        assert_half_habit_between(
            &factory,
            json!({ IGNORE_THREATS_PROB: 0.5 }),
            GAMES,
            affected,
            all,
            expert,
        )
        .await;
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        let knobs = json!({ IGNORE_THREATS_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&StrategyGame::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "no_block_prob": 0.5 }), "`no_block_prob`"),
            (json!({ IGNORE_THREATS_PROB: 2 }), "`ignore_threats_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(
                StrategyDemonstrator::from_knobs(0, &knobs),
                "strategy-game",
                knob,
            );
        }
    }
}
