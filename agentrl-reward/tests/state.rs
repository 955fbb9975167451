//! Reward state for checkpoints: a tree's `RewardFn::state` restored into a fresh build of
//! the same config continues bit for bit; states that do not fit are errors saying where.

use crate::common::{solved, turn};
use agentrl_core::{Error, RewardFn, Trajectory, Turn};
use agentrl_reward::{
    Clip, FormatReward, Gate, OutcomeReward, RewardConfig, RunningNorm, RunningStats, ScaleOffset,
    ScoreReward, WeightedSum,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct File {
    reward: RewardConfig,
}

/// `weighted_sum[running_norm(score), gate(outcome, clip(running_norm(turn_shaping))), format]`.
const TREE: &str = r#"
[reward]
type = "weighted_sum"

[[reward.terms]]
weight = 0.7
reward = { type = "running_norm", reward = { type = "score" } }

[[reward.terms]]
weight = 0.3
[reward.terms.reward]
type = "gate"
condition = { type = "outcome" }
reward = { type = "clip", min = -3.0, max = 3.0, reward = { type = "running_norm", eps = 1e-3, reward = { type = "turn_shaping", discount = 0.9 } } }

[[reward.terms]]
weight = 0.1
reward = { type = "format" }
"#;

fn build(text: &str) -> Box<dyn RewardFn> {
    let file: File = toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    file.reward.build().unwrap()
}

/// `n` trajectories with awkward scores and per-turn rewards, a different set per `seed`.
fn batch(seed: u64, n: usize) -> Vec<Trajectory> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|i| {
            let mut t = solved();
            t.score = Some(next() * 10.0 - 5.0);
            t.success = i % 3 != 0;
            t.turns = (0..1 + i % 3)
                .map(|_| Turn {
                    reward: next() * 2.0 - 1.0,
                    ..turn(4, false)
                })
                .collect();
            t
        })
        .collect()
}

/// The totals and parts of scoring `batch` in order, as bits.
async fn score_bits(reward: &dyn RewardFn, batch: &[Trajectory]) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    for t in batch {
        let b = reward.score(t).await.unwrap();
        let mut bits = vec![b.total.to_bits()];
        bits.extend(b.parts.values().map(|v| v.to_bits()));
        out.push(bits);
    }
    out
}

/// `state` written as a checkpoint would write it, and read back.
fn through_text(state: &Value) -> Value {
    serde_json::from_str(&serde_json::to_string(state).unwrap()).unwrap()
}

fn restore_error(reward: &dyn RewardFn, state: &Value) -> String {
    match reward.restore_state(state) {
        Err(e @ Error::Reward { .. }) => e.to_string(),
        Err(other) => panic!("expected a reward error, got {other}"),
        Ok(()) => panic!("expected an error restoring {state}"),
    }
}

#[tokio::test]
async fn a_restored_tree_continues_bit_for_bit() {
    let original = build(TREE);
    score_bits(original.as_ref(), &batch(1, 25)).await;
    let state = original.state().expect("the tree holds two running norms");
    assert_eq!(state["type"], "weighted_sum");
    assert_eq!(state["terms"][0]["type"], "running_norm");
    assert_eq!(state["terms"][0]["count"], 25);
    assert_eq!(state["terms"][0]["reward"], Value::Null);
    assert_eq!(state["terms"][1]["reward"]["reward"]["count"], 25);
    assert_eq!(state["terms"][2], Value::Null);

    let restored = build(TREE);
    restored.restore_state(&through_text(&state)).unwrap();
    assert_eq!(restored.state().as_ref(), Some(&state));
    let unrestored = build(TREE);

    let next = batch(2, 25);
    let want = score_bits(original.as_ref(), &next).await;
    assert_eq!(score_bits(restored.as_ref(), &next).await, want);
    assert_ne!(score_bits(unrestored.as_ref(), &next).await, want);
    assert_eq!(restored.state(), original.state());
}

#[test]
fn running_stats_survive_json_text_exactly() {
    let awkward = [
        0.1 + 0.2,
        2.0 / 3.0,
        std::f64::consts::PI,
        1.966_818_868_613_225_7,
        -3.712_543_940_828_610_7,
        1.071_566_039_146_582_6e-75,
        -1.603_964_615_428_183e143,
        f64::EPSILON,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        -f64::MAX,
        -0.0,
    ];
    for (i, &mean) in awkward.iter().enumerate() {
        let m2 = awkward[(i + 1) % awkward.len()].abs();
        for count in [2, 1 << 53, u64::MAX] {
            let stats = RunningStats { count, mean, m2 };
            let norm = RunningNorm::new(OutcomeReward::default(), 1e-6);
            norm.set_stats(stats);
            let state = through_text(&norm.state().unwrap());
            let fresh = RunningNorm::new(OutcomeReward::default(), 1e-6);
            fresh.restore_state(&state).unwrap();
            let back = fresh.stats();
            assert_eq!(
                (back.count, back.mean.to_bits(), back.m2.to_bits()),
                (count, mean.to_bits(), m2.to_bits()),
                "{stats:?} came back as {back:?} through {state}"
            );
        }
    }
}

#[test]
fn stateless_trees_have_no_state_and_accept_only_null() {
    let trees: Vec<Box<dyn RewardFn>> = vec![
        Box::new(OutcomeReward::default()),
        Box::new(
            WeightedSum::new(vec![])
                .term(1.0, OutcomeReward::default())
                .term(0.1, FormatReward),
        ),
        Box::new(Gate::new(
            FormatReward,
            Clip::new(
                ScaleOffset::new(ScoreReward::default(), 2.0, -1.0),
                -1.0,
                1.0,
            ),
            1.0,
        )),
        build("[reward]\ntype = \"clip\"\nmin = 0\nmax = 1\nreward = { type = \"outcome\" }\n"),
    ];
    for tree in &trees {
        assert_eq!(tree.state(), None, "{}", tree.name());
        tree.restore_state(&Value::Null).unwrap();
        let got = restore_error(tree.as_ref(), &json!({"type": "running_norm"}));
        assert!(got.contains(tree.name()), "{got}");
    }
    assert_eq!(
        restore_error(trees[0].as_ref(), &json!([1])),
        "reward `outcome`: it has no state to restore, but was given an array"
    );
    assert_eq!(
        restore_error(
            trees[1].as_ref(),
            &json!({"type": "weighted_sum", "terms": [null]})
        ),
        "reward `weighted_sum`: terms must be an array of 2 states, one per term, got 1 states"
    );
}

#[tokio::test]
async fn a_state_of_another_shape_is_an_error_saying_where() {
    let original = build(TREE);
    score_bits(original.as_ref(), &batch(3, 5)).await;
    let state = original.state().unwrap();
    let norm = |inner: &str| format!("{{ type = \"running_norm\", reward = {inner} }}");
    let variant = |terms: &[String]| {
        let mut text = "[reward]\ntype = \"weighted_sum\"\n".to_string();
        for term in terms {
            text += &format!("[[reward.terms]]\nweight = 1.0\nreward = {term}\n");
        }
        build(&text)
    };
    let score = "{ type = \"score\" }".to_string();
    let shaping = "{ type = \"turn_shaping\" }".to_string();
    let format = "{ type = \"format\" }".to_string();
    let cases = [
        (
            variant(&[norm(&score), norm(&shaping)]),
            "reward `weighted_sum`: terms must be an array of 2 states, one per term, got 3 states",
        ),
        (
            variant(&[norm(&score), norm(&shaping), format.clone()]),
            "reward `weighted_sum`: term 1 (running_norm): expected the state of a \
             `running_norm`, got that of a `gate`",
        ),
        (
            variant(&[score.clone(), norm(&shaping), format.clone()]),
            "reward `weighted_sum`: term 0 (score): it has no state to restore, but was given \
             an object",
        ),
        (
            variant(&[norm(&score), shaping, norm(&format)]),
            "reward `weighted_sum`: term 1 (turn_shaping): it has no state to restore, but was \
             given an object",
        ),
        (
            build(&TREE.replace(
                "reward = { type = \"format\" }",
                "reward = { type = \"running_norm\", reward = { type = \"format\" } }",
            )),
            "reward `weighted_sum`: term 2 (running_norm): the state holds nothing for this \
             stateful part",
        ),
        (
            variant(&[
                norm(&norm(&score)),
                "{ type = \"outcome\" }".to_string(),
                format,
            ]),
            "reward `weighted_sum`: term 0 (running_norm): reward (running_norm): the state \
             holds nothing for this stateful part",
        ),
        (
            build(&format!(
                "[reward]\ntype = \"running_norm\"\nreward = {score}\n"
            )),
            "reward `running_norm`: expected the state of a `running_norm`, got that of a \
             `weighted_sum`",
        ),
    ];
    for (tree, want) in &cases {
        let before = tree.state();
        assert_eq!(restore_error(tree.as_ref(), &state), *want);
        assert_eq!(tree.state(), before, "a failed restore changes nothing");
    }
    // The gate's reward is a clip: a scale_offset in its place has the same keys but not the
    // same type.
    let other = build(&TREE.replace(
        "type = \"clip\", min = -3.0, max = 3.0",
        "type = \"scale_offset\"",
    ));
    assert_eq!(
        restore_error(other.as_ref(), &state),
        "reward `weighted_sum`: term 1 (gate): reward (scale_offset): expected the state of a \
         `scale_offset`, got that of a `clip`"
    );
    // A fresh tree missing its state entirely.
    assert_eq!(
        restore_error(build(TREE).as_ref(), &Value::Null),
        "reward `weighted_sum`: term 0 (running_norm): the state holds nothing for this \
         stateful part"
    );
}

/// Spoils a state in place.
type Corrupt = dyn Fn(&mut Value);

#[tokio::test]
async fn bad_values_are_errors_and_change_nothing() {
    let trained = build(TREE);
    score_bits(trained.as_ref(), &batch(4, 7)).await;
    let good = trained.state().unwrap();
    // The target has a state of its own, which a failed restore must leave as it was.
    let target = build(TREE);
    score_bits(target.as_ref(), &batch(5, 3)).await;
    let before = target.state();

    let deep = "reward `weighted_sum`: term 1 (gate): reward (clip): reward (running_norm): ";
    let cases: Vec<(Box<Corrupt>, String)> = vec![
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["count"] = json!(-1)),
            format!("{deep}count must be a whole number >= 0, got -1"),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["count"] = json!(2.5)),
            format!("{deep}count must be a whole number >= 0, got 2.5"),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["mean"] = json!(f64::NAN)),
            format!("{deep}mean must be a finite number, got null"),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["mean"] = json!("0.5")),
            format!("{deep}mean must be a finite number, got \"0.5\""),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["m2"] = json!(-0.5)),
            format!("{deep}m2 must be >= 0, got -0.5"),
        ),
        (
            Box::new(|s| {
                s["terms"][1]["reward"]["reward"]
                    .as_object_mut()
                    .unwrap()
                    .remove("m2");
            }),
            format!("{deep}m2 must be a finite number, got null"),
        ),
        (
            Box::new(|s| {
                s["terms"][1]["reward"]["reward"]["count"] = json!(1);
                s["terms"][1]["reward"]["reward"]["m2"] = json!(0.25);
            }),
            format!("{deep}m2 must be 0 with a count of 1, got 0.25"),
        ),
        (
            Box::new(|s| {
                s["terms"][1]["reward"]["reward"] =
                    json!({"type": "running_norm", "count": 0, "mean": 1.5, "m2": 0.0});
            }),
            format!("{deep}mean must be 0 with a count of 0, got 1.5"),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"]["std"] = json!(1.0)),
            format!("{deep}unknown key `std` (expected type, count, mean, m2, reward)"),
        ),
        (
            Box::new(|s| s["terms"][1]["reward"]["reward"] = json!(3)),
            format!("{deep}expected an object with type, count, mean, m2, reward, got a number"),
        ),
        (
            Box::new(|s| {
                s["terms"][1]["reward"]["reward"]
                    .as_object_mut()
                    .unwrap()
                    .remove("type");
            }),
            format!("{deep}expected an object with type = \"running_norm\""),
        ),
        (
            Box::new(|s| s["terms"] = json!({})),
            "reward `weighted_sum`: terms must be an array of 3 states, one per term, got an \
             object"
                .to_string(),
        ),
    ];
    for (corrupt, want) in &cases {
        let mut state = good.clone();
        corrupt(&mut state);
        assert_eq!(restore_error(target.as_ref(), &state), *want, "{state}");
        assert_eq!(target.state(), before, "a failed restore changed the tree");
    }
    // The good state still restores.
    target.restore_state(&good).unwrap();
    assert_eq!(target.state().as_ref(), Some(&good));
}
