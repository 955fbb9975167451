//! The `[reward]` tree: every new type and composer in TOML, validation errors with their path,
//! and round trips.

use crate::common::{solved, trajectory, turn};
use agentrl_core::{Error, Outcome};
use agentrl_reward::{
    ExecutionConfig, FormatReward, GateConfig, LlmJudgeConfig, OutcomeReward, RewardConfig,
    ScoreReward, TurnShaping,
};
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize)]
struct File {
    reward: RewardConfig,
}

fn parse(text: &str) -> RewardConfig {
    match toml::from_str::<File>(text) {
        Ok(f) => f.reward,
        Err(e) => panic!("{e}\n{text}"),
    }
}

fn config_error(text: &str) -> String {
    match parse(text).build() {
        Err(Error::Config(message)) => message,
        Err(other) => panic!("expected a config error, got {other}"),
        Ok(_) => panic!("expected a config error for\n{text}"),
    }
}

const TREE: &str = r#"
[reward]
type = "weighted_sum"

[[reward.terms]]
weight = 1.0
[reward.terms.reward]
type = "clip"
min = -1.0
max = 1.0
reward = { type = "gate", threshold = 1.0, condition = { type = "format" }, reward = { type = "outcome" } }

[[reward.terms]]
weight = 0.5
reward = { type = "scale_offset", scale = 2.0, offset = -1.0, reward = { type = "score" } }

[[reward.terms]]
weight = 0.1
reward = { type = "efficiency", measure = "turns", best = 1, worst = 5 }

[[reward.terms]]
weight = 0.1
reward = { type = "tool_format", tools = ["calculator"] }

[[reward.terms]]
weight = 1.0
reward = { type = "length", unit = "chars", budget = 400, per_unit = 0.001 }

[[reward.terms]]
weight = 1.0
reward = { type = "incomplete_punishment" }

[[reward.terms]]
weight = 0.1
reward = { type = "turn_shaping", discount = 0.9 }

[[reward.terms]]
weight = 0.0
reward = { type = "execution", command = ["sh", "-c", "read a; test \"$a\" = 2"], timeout_ms = 5000 }
"#;

#[tokio::test]
async fn a_whole_tree_parses_builds_and_scores() {
    let cfg = parse(TREE);
    assert!(!cfg.needs_judge());
    assert_eq!(
        cfg.part_names(),
        [
            "outcome",
            "gate",
            "score",
            "efficiency",
            "tool_format",
            "length",
            "incomplete_punishment",
            "turn_shaping",
            "execution"
        ]
    );
    let f = cfg.build().unwrap();
    let b = f.score(&solved()).await.unwrap();
    // gate open: 1; score 1 → 2·1−1 = 1; efficiency 2 turns → 0.75; tool_format 1; rest 0.
    let want = 1.0 + 0.5 * 1.0 + 0.1 * 0.75 + 0.1 * 1.0;
    assert!((b.total - want).abs() < 1e-12, "{b:?}");
    assert_eq!(b.parts["execution"], 1.0);
    assert_eq!(b.parts.len(), 9);
}

#[test]
fn the_tree_round_trips_through_toml_and_json() {
    let cfg = parse(TREE);
    let text = toml::to_string(&File {
        reward: cfg.clone(),
    })
    .unwrap();
    assert_eq!(parse(&text), cfg);
    let json = serde_json::to_string(&cfg).unwrap();
    assert_eq!(serde_json::from_str::<RewardConfig>(&json).unwrap(), cfg);
}

#[test]
fn the_demo_config_still_parses() {
    let text = include_str!("../../configs/demo.toml");
    let value: toml::Table = toml::from_str(text).unwrap();
    let reward: RewardConfig = value["reward"].clone().try_into().unwrap();
    assert_eq!(reward.part_names(), ["outcome", "format"]);
    assert!(reward.build().is_ok());
}

#[test]
fn defaults_are_filled_in() {
    let cfg = parse("[reward]\ntype = \"llm_judge\"\nrubric = \"Grade it.\"\n");
    assert_eq!(
        cfg,
        RewardConfig::LlmJudge(LlmJudgeConfig {
            rubric: "Grade it.".into(),
            scale_min: 0.0,
            scale_max: 10.0,
            fallback: 0.0,
            timeout_ms: 30_000,
            max_concurrency: 4,
            cache_capacity: 10_000,
            max_transcript_chars: 4_000,
        })
    );
    assert_eq!(
        parse(
            "[reward]\ntype = \"gate\"\ncondition = { type = \"format\" }\nreward = { type = \"outcome\" }\n"
        ),
        RewardConfig::Gate(GateConfig {
            condition: Box::new(RewardConfig::Format(FormatReward)),
            reward: Box::new(RewardConfig::Outcome(OutcomeReward {
                success: 1.0,
                failure: 0.0
            })),
            threshold: 1.0,
            otherwise: 0.0,
        })
    );
    assert_eq!(
        parse("[reward]\ntype = \"turn_shaping\"\n"),
        RewardConfig::TurnShaping(TurnShaping { discount: 1.0 })
    );
    assert_eq!(
        parse("[reward]\ntype = \"score\"\n"),
        RewardConfig::Score(ScoreReward { missing: None })
    );
    assert_eq!(
        parse("[reward]\ntype = \"execution\"\ncommand = [\"true\"]\n"),
        RewardConfig::Execution(ExecutionConfig {
            command: vec!["true".into()],
            timeout_ms: 10_000,
            sandbox: false,
            files: vec![],
        })
    );
}

#[test]
fn unknown_fields_and_units_are_rejected() {
    for bad in [
        "[reward]\ntype = \"efficiency\"\nmeasure = \"seconds\"\nbest = 1\nworst = 2\n",
        "[reward]\ntype = \"length\"\nunit = \"words\"\nbudget = 1\nper_unit = 0.1\n",
        "[reward]\ntype = \"clip\"\nmin = 0\nmax = 1\nreward = { type = \"outcome\", bonus = 1 }\n",
        "[reward]\ntype = \"gate\"\nreward = { type = \"outcome\" }\n",
    ] {
        assert!(toml::from_str::<File>(bad).is_err(), "{bad}");
    }
}

#[test]
fn invalid_values_name_their_path() {
    let cases = [
        (
            "[reward]\ntype = \"weighted_sum\"\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"clip\", min = 2.0, max = 1.0, reward = { type = \"format\" } }\n",
            "reward.terms[1].reward.min (2) must not be greater than reward.terms[1].reward.max (1)",
        ),
        (
            "[reward]\ntype = \"clip\"\nmin = 0.0\nmax = 1.0\nreward = { type = \"scale_offset\", scale = nan, reward = { type = \"outcome\" } }\n",
            "reward.reward.scale must be a finite number, got NaN",
        ),
        (
            "[reward]\ntype = \"gate\"\nthreshold = 1.0\ncondition = { type = \"outcome\", failure = inf }\nreward = { type = \"outcome\" }\n",
            "reward.condition.failure must be a finite number, got inf",
        ),
        (
            "[reward]\ntype = \"efficiency\"\nmeasure = \"tokens\"\nbest = 10\nworst = 10\n",
            "reward.worst must be greater than reward.best (10), got 10",
        ),
        (
            "[reward]\ntype = \"turn_shaping\"\ndiscount = 1.5\n",
            "reward.discount must be in [0, 1], got 1.5",
        ),
        (
            "[reward]\ntype = \"running_norm\"\neps = 0.0\nreward = { type = \"outcome\" }\n",
            "reward.eps must be a positive finite number, got 0",
        ),
        (
            "[reward]\ntype = \"length\"\nunit = \"tokens\"\nbudget = 3\nper_unit = -0.1\n",
            "reward.per_unit must be >= 0, got -0.1",
        ),
        (
            "[reward]\ntype = \"execution\"\ncommand = []\n",
            "reward.command must name a program",
        ),
        (
            "[reward]\ntype = \"execution\"\ncommand = [\"true\"]\ntimeout_ms = 0\n",
            "reward.timeout_ms must be at least 1",
        ),
        (
            "[reward]\ntype = \"tool_format\"\ntools = [\"calculator\", \" \"]\n",
            "reward.tools[1] is a blank tool name",
        ),
        (
            "[reward]\ntype = \"score\"\nmissing = nan\n",
            "reward.missing must be a finite number",
        ),
        (
            "[reward]\ntype = \"llm_judge\"\nrubric = \" \"\n",
            "reward.rubric is blank",
        ),
        (
            "[reward]\ntype = \"llm_judge\"\nrubric = \"x\"\nscale_min = 5\nscale_max = 5\n",
            "reward.scale_max must be greater than reward.scale_min (5), got 5",
        ),
        (
            "[reward]\ntype = \"llm_judge\"\nrubric = \"x\"\nfallback = 2\n",
            "reward.fallback must be in [0, 1]",
        ),
        (
            "[reward]\ntype = \"llm_judge\"\nrubric = \"x\"\nmax_concurrency = 0\n",
            "reward.max_concurrency must be at least 1",
        ),
        (
            "[reward]\ntype = \"running_norm\"\nreward = { type = \"llm_judge\", rubric = \"x\" }\n",
            "reward.reward is an llm_judge but no judge backend was given",
        ),
        (
            "[reward]\ntype = \"gate\"\nthreshold = 0.5\ncondition = { type = \"format\" }\nreward = { type = \"gate\", threshold = 1.0, condition = { type = \"format\" }, reward = { type = \"outcome\" } }\n",
            "reward.reward already produces the part `gate`",
        ),
        (
            "[reward]\ntype = \"weighted_sum\"\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"gate\", threshold = 1.0, condition = { type = \"format\" }, reward = { type = \"outcome\" } }\n",
            "reward.terms[1].reward produces the part `outcome`",
        ),
    ];
    for (text, want) in cases {
        let got = config_error(text);
        assert!(got.starts_with(want), "want {want:?}\n got {got:?}");
    }
}

#[tokio::test]
async fn running_norm_from_config_keeps_one_state_per_build() {
    let cfg = parse("[reward]\ntype = \"running_norm\"\nreward = { type = \"outcome\" }\n");
    let f = cfg.build().unwrap();
    let failed = trajectory(vec![turn(1, false)], Some("3"), Outcome::Completed, false);
    assert_eq!(f.score(&solved()).await.unwrap().total, 0.0);
    assert!(f.score(&failed).await.unwrap().total < -0.9);
    // A second build starts from scratch.
    let g = cfg.build().unwrap();
    assert_eq!(g.score(&failed).await.unwrap().total, 0.0);
}

#[test]
fn every_type_rejects_an_unknown_field_by_name() {
    for table in [
        "type = \"outcome\"",
        "type = \"format\"",
        "type = \"incomplete_punishment\"",
        "type = \"length_penalty\"\nmax_generated_tokens = 1\nper_token = 0.1",
        "type = \"weighted_sum\"\nterms = [{ weight = 1.0, reward = { type = \"outcome\" } }]",
        "type = \"score\"",
        "type = \"efficiency\"\nmeasure = \"turns\"\nbest = 1\nworst = 2",
        "type = \"tool_format\"",
        "type = \"length\"\nunit = \"chars\"\nbudget = 1\nper_unit = 0.1",
        "type = \"execution\"\ncommand = [\"true\"]",
        "type = \"llm_judge\"\nrubric = \"x\"",
        "type = \"gate\"\ncondition = { type = \"format\" }\nreward = { type = \"outcome\" }",
        "type = \"clip\"\nmin = 0\nmax = 1\nreward = { type = \"outcome\" }",
        "type = \"scale_offset\"\nreward = { type = \"outcome\" }",
        "type = \"turn_shaping\"",
        "type = \"running_norm\"\nreward = { type = \"outcome\" }",
    ] {
        let good = format!("[reward]\n{table}\n");
        let cfg = parse(&good);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<RewardConfig>(&json).unwrap(), cfg);
        let bad = format!("[reward]\n{table}\nbogus_field = 1\n");
        let message = match toml::from_str::<File>(&bad) {
            Ok(_) => panic!("accepted an unknown field:\n{bad}"),
            Err(e) => e.to_string(),
        };
        assert!(message.contains("bogus_field"), "{message}");
    }
    let stray_term = "[reward]\ntype = \"weighted_sum\"\nterms = [{ weight = 1.0, bogus_field = 1, reward = { type = \"outcome\" } }]\n";
    let message = toml::from_str::<File>(stray_term)
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("bogus_field"), "{message}");
    assert_eq!(
        serde_json::to_string(&parse("[reward]\ntype = \"format\"\n")).unwrap(),
        r#"{"type":"format"}"#
    );
}
