//! Task generation of `arith-calc`: determinism, split disjointness and data shape.

use std::collections::HashSet;

use agentrl_core::Split;
use agentrl_env::{ArithCalc, EnvFactory, lookup};

#[test]
fn same_seed_gives_identical_tasks() {
    let a = ArithCalc::new(42);
    let b = ArithCalc::new(42);
    for index in 0..200 {
        for split in [Split::Train, Split::Test] {
            assert_eq!(a.task(split, index), b.task(split, index));
        }
    }
    let default = lookup("arith-calc").unwrap();
    assert_eq!(
        default.task(Split::Test, 5),
        ArithCalc::new(0).task(Split::Test, 5)
    );
}

#[test]
fn different_seeds_give_different_task_sets() {
    let a = ArithCalc::new(1);
    let b = ArithCalc::new(2);
    let differing = (0..50)
        .filter(|&i| a.task(Split::Train, i).data != b.task(Split::Train, i).data)
        .count();
    assert!(differing > 40, "only {differing} of 50 tasks differ");
}

#[test]
fn train_and_test_are_disjoint() {
    let factory = ArithCalc::default();
    let expressions = |split| -> HashSet<String> {
        (0..2000)
            .map(|i| {
                let task = factory.task(split, i);
                assert_eq!(task.split, split);
                task.data["expression"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let train = expressions(Split::Train);
    let test = expressions(Split::Test);
    assert!(train.len() > 1900 && test.len() > 1900);
    assert!(train.is_disjoint(&test));
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
