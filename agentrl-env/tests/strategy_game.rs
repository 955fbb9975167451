//! `strategy-game`: the reference solver against the default and stronger opponents, the
//! rules (wins, full columns), losses scored 0, determinism, splits and malformed actions.

use agentrl_core::{Env, Message, Split, ToolCall};
use agentrl_env::strategy_game::{Board, Opponent, Piece, StrategyExpert, game_of};
use agentrl_env::{EnvFactory, StrategyGame, lookup, run_solver_episode};
use serde_json::json;

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_same_tasks, task_data, unparsable_call,
};

fn drop_call(column: serde_json::Value) -> Message {
    let call = ToolCall::new("c1", "drop", &json!({ "column": column }));
    Message::assistant_tool_calls(None, vec![call])
}

/// (wins, draws) of the reference solver over the first `tasks` test games of `factory`.
async fn play(factory: &StrategyGame, tasks: u64) -> (u64, u64) {
    let mut solver = StrategyExpert::default();
    let (mut wins, mut draws) = (0, 0);
    for i in 0..tasks {
        let task = factory.task(Split::Test, i);
        let episode = run_solver_episode(factory, &mut solver, &task)
            .await
            .unwrap();
        assert!(!episode.truncated, "{}", task.id);
        wins += u64::from(episode.success);
        let last = episode.messages.last().unwrap().text();
        draws += u64::from(last.contains("draw"));
    }
    (wins, draws)
}

#[tokio::test]
async fn reference_solver_beats_the_default_opponent() {
    let factory = lookup("strategy-game").unwrap();
    assert!(factory.task(Split::Test, 0).data["opponent"] == "greedy");
    let (wins, draws) = play(&StrategyGame::default(), 40).await;
    println!("strategy-game reference solver vs greedy: {wins} wins, {draws} draws of 40");
    assert!(wins * 100 >= 40 * 95, "{wins}/40");
}

#[tokio::test]
async fn reference_solver_against_stronger_opponents() {
    for (opponent, tasks, min_wins) in [(Opponent::Random, 10, 10), (Opponent::Minimax(2), 10, 7)] {
        let (wins, draws) = play(&StrategyGame::new(0, opponent), tasks).await;
        println!(
            "vs {}: {wins} wins, {draws} draws of {tasks}",
            opponent.name()
        );
        assert!(wins >= min_wins, "{}: {wins}/{tasks}", opponent.name());
    }
}

#[tokio::test]
async fn losses_score_zero_and_full_columns_are_invalid() {
    let factory = StrategyGame::new(1, Opponent::Minimax(3));
    let task = factory.task(Split::Train, 0);
    let mut env = factory.make();
    env.reset(&task).await.unwrap();
    let mut board = game_of(&task).unwrap().board();
    // Always the leftmost free column: a strong opponent wins.
    let mut last = None;
    for _ in 0..factory.max_turns() {
        let column = board.legal_columns()[0];
        let step = env.step(&drop_call(json!(column + 1))).await.unwrap();
        assert!(step.info.invalid_action.is_none(), "{step:?}");
        board = Board::parse_last(step.messages[0].text()).unwrap();
        if step.done() {
            last = Some(step);
            break;
        }
    }
    let last = last.unwrap();
    assert!(last.terminated);
    assert_eq!(last.info.extra["outcome"], json!("loss"));
    assert_eq!((last.reward, last.info.success), (0.0, Some(false)));

    // A column filled up by both players is refused without ending the game.
    let factory = StrategyGame::new(0, Opponent::Random);
    let mut env = factory.make();
    let task = factory.task(Split::Test, 0);
    env.reset(&task).await.unwrap();
    let mut board = game_of(&task).unwrap().board();
    while board.can_drop(6) {
        let step = env.step(&drop_call(json!(7))).await.unwrap();
        if step.done() {
            return; // the game ended before the column filled
        }
        board = Board::parse_last(step.messages[0].text()).unwrap();
    }
    let step = env.step(&drop_call(json!(7))).await.unwrap();
    assert!(!step.done());
    assert!(
        step.info
            .invalid_action
            .as_deref()
            .unwrap()
            .contains("full"),
        "{step:?}"
    );
}

#[test]
fn rules_find_fours_and_boards_round_trip() {
    let mut board = Board::default();
    for column in [0, 0, 1, 1, 2, 2] {
        let piece = board.to_move();
        board.drop_piece(column, piece);
    }
    assert_eq!(board.winner(), None);
    let row = board.drop_piece(3, Piece::X).unwrap();
    assert!(board.wins_at(row, 3));
    assert_eq!(board.winner(), Some(Piece::X));
    assert_eq!(
        Board::parse_last(&format!("noise\n{}", board.render())),
        Some(board.clone())
    );
    let mut diagonal = Board::default();
    for (column, height) in [(0, 0), (1, 1), (2, 2), (3, 3)] {
        for _ in 0..height {
            diagonal.drop_piece(column, Piece::O);
        }
        diagonal.drop_piece(column, Piece::X);
    }
    assert_eq!(diagonal.winner(), Some(Piece::X));
    let mut full = Board::default();
    for _ in 0..6 {
        assert!(full.drop_piece(4, Piece::O).is_some());
    }
    assert_eq!(full.drop_piece(4, Piece::O), None);
    assert!(Board::parse_last("X......\n").is_none());
}

#[test]
fn tasks_are_deterministic_disjoint_and_name_their_opponent() {
    let (a, b) = (StrategyGame::default(), StrategyGame::default());
    assert_same_tasks(&a, &b, &[Split::Test], 100);
    assert_disjoint_splits(&a, 1000, task_data, 990, 990);
    let strong = StrategyGame::new(0, Opponent::Minimax(4)).task(Split::Train, 0);
    assert_eq!(strong.data["opponent"], json!("minimax-4"));
    assert_eq!(Opponent::parse("minimax-4"), Some(Opponent::Minimax(4)));
    assert_eq!(Opponent::parse("minimax-9"), None);
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let factory = lookup("strategy-game").unwrap();
    let mut env = factory.make();
    env.reset(&factory.task(Split::Test, 3)).await.unwrap();
    let actions = [
        unparsable_call("drop"),
        drop_call(json!(0)),
        drop_call(json!(8)),
        drop_call(json!("four")),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c2", "resign", &json!({}))]),
        Message::assistant("4"),
        Message::assistant(""),
        Message::user("hi"),
    ];
    assert_all_invalid(&mut env, &actions).await;
}
