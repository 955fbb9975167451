//! Benchmark: the strategy game's reference move, a negamax search to the expert's depth, on
//! an opening and a middle-game position (the search the demonstrator and the scripted
//! `minimax-N` opponents run for every move).

use std::hint::black_box;

use agentrl_env::strategy_game::{Board, EXPERT_DEPTH, Piece, best_column};
use criterion::{Criterion, criterion_group, criterion_main};

/// The board after dropping pieces, X first, into these columns (0-based).
fn position(columns: &[usize]) -> Board {
    let mut board = Board::default();
    let mut piece = Piece::X;
    for &column in columns {
        board
            .drop_piece(column, piece)
            .expect("the benchmark's moves are legal");
        piece = piece.other();
    }
    board
}

fn bench_best_column(c: &mut Criterion) {
    for (name, columns) in [
        ("strategy_best_column_opening", &[3, 3][..]),
        (
            "strategy_best_column_middle",
            &[3, 3, 2, 4, 4, 2, 1, 5, 3, 3, 0, 6][..],
        ),
    ] {
        let board = position(columns);
        let piece = board.to_move();
        c.bench_function(name, |b| {
            b.iter(|| best_column(black_box(&board), piece, EXPERT_DEPTH))
        });
    }
}

criterion_group!(benches, bench_best_column);
criterion_main!(benches);
