//! Imperfect demonstrators owned by the envs: `EnvFactory::demonstrator` with knobs.
//! `arith-calc`'s reproduces the `ArithDemonstrator` the trainer built from its own config;
//! envs without knobs give their reference solver; a mixture gives each env's own.

use std::sync::Arc;

use agentrl_core::{Error, Split};
use agentrl_env::{
    ArithCalc, ArithDemonstrator, DemonstratorKnobs, EnvFactory, EnvMix, Solver, SolverEpisode,
    env_ids, lookup, run_solver_episode,
};
use serde_json::json;

fn knobs(value: serde_json::Value) -> DemonstratorKnobs {
    value.as_object().unwrap().clone()
}

/// `[sft.demonstrator]` of `configs/demo.toml`.
fn demo_knobs() -> DemonstratorKnobs {
    knobs(json!({
        "tool_prob_two_operands": 0.4,
        "tool_prob_three_operands": 0.85,
        "copy_error_prob": 0.1,
    }))
}

/// Episodes of `solver` on `n` train tasks of `factory` from index `first`, in order (as the
/// trainer collects demonstrations).
async fn episodes(
    factory: &dyn EnvFactory,
    solver: &mut dyn Solver,
    first: u64,
    n: u64,
) -> Vec<SolverEpisode> {
    let mut out = Vec::new();
    for index in first..first + n {
        let task = factory.task(Split::Train, index);
        out.push(run_solver_episode(factory, solver, &task).await.unwrap());
    }
    out
}

#[tokio::test]
async fn arith_demonstrations_are_those_the_trainer_made_for_the_demo_config() {
    let factory = ArithCalc::default();
    // The trainer built `ArithDemonstrator::new(config.seed, two, three, copy)` and collected
    // demonstrations from train task 1_000_000_000 on; the demo's seed is 0.
    for seed in [0, 7] {
        let mut before = ArithDemonstrator::new(seed, 0.4, 0.85, 0.1);
        let mut after = factory.demonstrator(&demo_knobs(), seed).unwrap();
        let expected = episodes(&factory, &mut before, 1_000_000_000, 300).await;
        let got = episodes(&factory, after.as_mut(), 1_000_000_000, 300).await;
        assert_eq!(got, expected, "seed {seed}");
        let correct = got.iter().filter(|e| e.success).count();
        assert!((60..240).contains(&correct), "imperfect: {correct}/300");
    }
    let via_lookup = lookup("arith-calc").unwrap();
    let names: Vec<&str> = via_lookup
        .demonstrator_knobs()
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(
        names,
        [
            "tool_prob_two_operands",
            "tool_prob_three_operands",
            "copy_error_prob"
        ]
    );
}

#[tokio::test]
async fn missing_arith_knobs_turn_their_imperfection_off() {
    let factory = ArithCalc::default();
    let mut perfect = factory.demonstrator(&DemonstratorKnobs::new(), 3).unwrap();
    let all = episodes(&factory, perfect.as_mut(), 0, 100).await;
    assert!(all.iter().all(|e| e.success));
    let mut only_copy_errors = factory
        .demonstrator(&knobs(json!({"copy_error_prob": 1.0})), 3)
        .unwrap();
    let all = episodes(&factory, only_copy_errors.as_mut(), 0, 50).await;
    assert!(
        all.iter().all(|e| !e.success && e.steps == 2),
        "tool used, result miscopied"
    );
}

fn config_error(result: agentrl_core::Result<Box<dyn Solver>>) -> String {
    match result {
        Err(err @ Error::Config(_)) => err.to_string(),
        Err(other) => panic!("not a config error: {other}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn bad_arith_knobs_name_the_env_and_the_knob() {
    let factory = ArithCalc::default();
    let err = config_error(factory.demonstrator(&knobs(json!({"tool_prob": 0.5})), 0));
    assert!(
        err.contains("arith-calc") && err.contains("`tool_prob`"),
        "{err}"
    );
    for bad in [json!(1.5), json!(-0.1), json!("often")] {
        let err =
            config_error(factory.demonstrator(&knobs(json!({"copy_error_prob": bad.clone()})), 0));
        assert!(
            err.contains("arith-calc") && err.contains("`copy_error_prob`"),
            "{bad}: {err}"
        );
    }
}

#[tokio::test]
async fn an_env_without_knobs_demonstrates_with_its_reference_solver() {
    let math = lookup("math-reasoning").unwrap();
    assert!(math.demonstrator_knobs().is_empty());
    let mut demonstrator = math.demonstrator(&DemonstratorKnobs::new(), 1).unwrap();
    let mut reference = math.solver(1);
    let got = episodes(&*math, demonstrator.as_mut(), 0, 10).await;
    assert_eq!(got, episodes(&*math, reference.as_mut(), 0, 10).await);
    let err = config_error(math.demonstrator(&demo_knobs(), 1));
    assert!(
        err.contains("`math-reasoning`") && err.contains("demonstrator knob `"),
        "{err}"
    );
}

#[tokio::test]
async fn a_mixture_uses_each_envs_own_demonstrator() {
    let arith: Arc<dyn EnvFactory> = Arc::new(ArithCalc::default());
    let maze = lookup("maze").unwrap();
    let mix = EnvMix::new(vec![(arith.clone(), 3.0), (maze.clone(), 1.0)]).unwrap();
    // arith-calc's three knobs and maze's `beeline_prob`.
    assert_eq!(mix.demonstrator_knobs().len(), 4);
    // Each env gets the knobs it declares: arith-calc's are not maze's business.
    let mut tuned = mix.demonstrator(&demo_knobs(), 0).unwrap();
    let played = episodes(&mix, tuned.as_mut(), 0, 100).await;
    let (arith_played, maze_played): (Vec<_>, Vec<_>) = played
        .iter()
        .zip(0..)
        .partition(|(_, i)| mix.task(Split::Train, *i).env_id == "arith-calc");
    assert!(
        maze_played.iter().all(|(e, _)| e.success),
        "maze keeps its reference solver"
    );
    assert!(
        arith_played.iter().any(|(e, _)| !e.success),
        "arith-calc's demonstrator makes its mistakes"
    );
    // A knob no env of the mixture has is an error naming it and the envs.
    let mut stray = demo_knobs();
    stray.insert("wall_bump_prob".into(), serde_json::json!(0.5));
    let err = config_error(mix.demonstrator(&stray, 0));
    assert!(
        err.contains("wall_bump_prob") && err.contains("maze"),
        "{err}"
    );

    let mut demonstrator = mix.demonstrator(&DemonstratorKnobs::new(), 0).unwrap();
    let played = episodes(&mix, demonstrator.as_mut(), 0, 24).await;
    assert!(played.iter().all(|e| e.success));

    // A mixture of arith-calc alone demonstrates exactly like arith-calc's demonstrator.
    let alone = EnvMix::new(vec![(arith.clone(), 1.0)]).unwrap();
    let mut mixed = alone.demonstrator(&demo_knobs(), 5).unwrap();
    let mut own = arith.demonstrator(&demo_knobs(), 5).unwrap();
    assert_eq!(
        episodes(&alone, mixed.as_mut(), 0, 100).await,
        episodes(&*arith, own.as_mut(), 0, 100).await
    );
}

#[tokio::test]
async fn a_mixture_takes_per_env_knob_tables() {
    let arith: Arc<dyn EnvFactory> = Arc::new(ArithCalc::default());
    let maze = lookup("maze").unwrap();
    let mix = EnvMix::new(vec![(arith.clone(), 1.0), (maze, 1.0)]).unwrap();
    // `[sft.demonstrator.arith-calc]`: the table is arith-calc's own and wins over a shared knob.
    let table = knobs(json!({
        "copy_error_prob": 1.0,
        "arith-calc": { "tool_prob_two_operands": 1.0, "tool_prob_three_operands": 1.0,
                        "copy_error_prob": 0.0 },
    }));
    let mut tuned = mix.demonstrator(&table, 0).unwrap();
    let played = episodes(&mix, tuned.as_mut(), 0, 40).await;
    assert!(
        played.iter().all(|e| e.success),
        "the table's perfect knobs win"
    );
    let mut own = arith.demonstrator(&demo_knobs(), 3).unwrap();
    let per_env = knobs(json!({ "arith-calc": demo_knobs() }));
    let mut mixed = mix.demonstrator(&per_env, 3).unwrap();
    let arith_tasks: Vec<u64> = (0..200)
        .filter(|&i| mix.task(Split::Train, i).env_id == "arith-calc")
        .collect();
    for i in arith_tasks {
        let task = mix.task(Split::Train, i);
        let a = run_solver_episode(&mix, mixed.as_mut(), &task)
            .await
            .unwrap();
        let b = run_solver_episode(&*arith, own.as_mut(), &task)
            .await
            .unwrap();
        assert_eq!(a, b, "task {i}");
    }
    // A bad knob inside an env's table is that env's error; a table that is not one is too.
    let err = config_error(mix.demonstrator(&knobs(json!({"arith-calc": {"nope": 1}})), 0));
    assert!(
        err.contains("arith-calc") && err.contains("`nope`"),
        "{err}"
    );
    let err = config_error(mix.demonstrator(&knobs(json!({"maze": 0.5})), 0));
    assert!(err.contains("`maze`") && err.contains("table"), "{err}");
}

#[test]
fn every_builtin_env_but_math_reasoning_and_dataset_has_documented_knobs() {
    for id in env_ids() {
        let factory = lookup(id).unwrap();
        let declared = factory.demonstrator_knobs();
        if ["math-reasoning", "dataset"].contains(&id) {
            assert!(declared.is_empty(), "{id}");
            continue;
        }
        assert!(!declared.is_empty(), "{id} has no demonstrator knobs");
        for (name, doc) in declared {
            assert!(
                doc.contains("(default "),
                "{id}: `{name}` does not say its default"
            );
        }
        // Without knobs the demonstrator is built; an unknown knob names the env and the knob.
        assert!(
            factory.demonstrator(&DemonstratorKnobs::new(), 0).is_ok(),
            "{id}"
        );
        let err = config_error(factory.demonstrator(&knobs(json!({"no_such_knob": 0.5})), 0));
        assert!(
            err.contains(&format!("`{id}`")) && err.contains("`no_such_knob`"),
            "{err}"
        );
    }
}
