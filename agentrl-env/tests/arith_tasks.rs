//! Task generation of `arith-calc`: determinism, split disjointness and data shape.

use agentrl_core::Split;
use agentrl_env::{ArithCalc, EnvFactory, lookup};

use crate::common::contract::{assert_disjoint_splits, assert_same_tasks, assert_seeds_differ};

#[test]
fn same_seed_gives_identical_tasks() {
    let a = ArithCalc::new(42);
    let b = ArithCalc::new(42);
    assert_same_tasks(&a, &b, &[Split::Train, Split::Test], 200);
    let default = lookup("arith-calc").unwrap();
    assert_eq!(
        default.task(Split::Test, 5),
        ArithCalc::new(0).task(Split::Test, 5)
    );
}

#[test]
fn different_seeds_give_different_task_sets() {
    assert_seeds_differ(&ArithCalc::new(1), &ArithCalc::new(2), 40);
}

#[test]
fn train_and_test_are_disjoint() {
    let expression =
        |task: &agentrl_core::Task| task.data["expression"].as_str().unwrap().to_string();
    assert_disjoint_splits(&ArithCalc::default(), 2000, expression, 1900, 1900);
}

#[test]
fn task_data_has_the_documented_shape() {
    let factory = ArithCalc::default();
    let mut operand_counts = [0usize; 2];
    for index in 0..400 {
        let task = factory.task(Split::Train, index);
        assert_eq!(task.id, format!("train-{index}"));
        assert_eq!(task.env_id, "arith-calc");
        let expr = task.data["expression"].as_str().unwrap();
        let answer: i64 = task.data["answer"].as_str().unwrap().parse().unwrap();
        let operands = task.data["operands"].as_u64().unwrap();
        let numbers: Vec<i64> = expr
            .split(['+', '-', '*'])
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(numbers.len() as u64, operands);
        assert!(numbers.iter().all(|n| (10..=99).contains(n)), "{expr}");
        assert!(
            expr.chars()
                .all(|c| c.is_ascii_digit() || "+-*".contains(c))
        );
        let value = agentrl_tools::evaluate(expr).unwrap().to_string();
        assert_eq!(value, answer.to_string(), "{expr}");
        operand_counts[operands as usize - 2] += 1;
    }
    assert!(
        operand_counts.iter().all(|&n| n > 120),
        "{operand_counts:?}"
    );
}
