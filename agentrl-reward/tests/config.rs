//! Parsing reward configs from TOML, validating them and building reward functions.

use crate::common::{solved, trajectory, turn};
use agentrl_core::Error;
use agentrl_reward::{
    FormatReward, IncompletePunishment, LengthPenalty, OutcomeReward, RewardConfig,
    WeightedSumConfig, WeightedTermConfig,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct File {
    reward: RewardConfig,
}

fn parse(text: &str) -> Result<RewardConfig, toml::de::Error> {
    toml::from_str::<File>(text).map(|f| f.reward)
}

fn config_error(cfg: &RewardConfig) -> String {
    match cfg.build() {
        Err(Error::Config(message)) => message,
        Err(other) => panic!("expected a config error, got {other}"),
        Ok(_) => panic!("expected a config error, got a reward function"),
    }
}

const EXAMPLE: &str = r#"
[reward]
type = "weighted_sum"
[[reward.terms]]
weight = 1.0
reward = { type = "outcome" }
[[reward.terms]]
weight = 0.1
reward = { type = "format" }
"#;

#[tokio::test]
async fn parses_and_builds_the_example() {
    let cfg = parse(EXAMPLE).unwrap();
    assert_eq!(
        cfg,
        RewardConfig::WeightedSum(WeightedSumConfig {
            terms: vec![
                WeightedTermConfig {
                    weight: 1.0,
                    reward: RewardConfig::Outcome(OutcomeReward {
                        success: 1.0,
                        failure: 0.0
                    }),
                },
                WeightedTermConfig {
                    weight: 0.1,
                    reward: RewardConfig::Format(FormatReward),
                },
            ]
        })
    );
    assert_eq!(cfg.part_names(), ["outcome", "format"]);
    let f = cfg.build().unwrap();
    assert_eq!(f.name(), "weighted_sum");
    let b = f.score(&solved()).await.unwrap();
    assert!((b.total - 1.1).abs() < 1e-12);
}

#[tokio::test]
async fn every_variant_parses() {
    let cfg = parse(
        r#"
[reward]
type = "weighted_sum"
[[reward.terms]]
weight = 2.0
reward = { type = "outcome", success = 1.5, failure = -0.5 }
[[reward.terms]]
weight = 1.0
reward = { type = "incomplete_punishment" }
[[reward.terms]]
weight = 1.0
reward = { type = "length_penalty", max_generated_tokens = 10, per_token = 0.01 }
"#,
    )
    .unwrap();
    let f = cfg.build().unwrap();
    let t = trajectory(
        vec![turn(30, false)],
        None,
        agentrl_core::Outcome::Truncated,
        false,
    );
    let b = f.score(&t).await.unwrap();
    assert!((b.total - (2.0 * -0.5 - 0.2 - 0.2)).abs() < 1e-12, "{b:?}");
    assert_eq!(b.parts["length_penalty"], -0.2);

    let p = parse("[reward]\ntype = \"incomplete_punishment\"\npenalty = -1.0\n").unwrap();
    assert_eq!(
        p,
        RewardConfig::IncompletePunishment(IncompletePunishment { penalty: -1.0 })
    );
    let d = parse("[reward]\ntype = \"incomplete_punishment\"\n").unwrap();
    assert_eq!(
        d,
        RewardConfig::IncompletePunishment(IncompletePunishment { penalty: -0.2 })
    );
}

#[test]
fn round_trips_through_json() {
    let cfg = parse(EXAMPLE).unwrap();
    let json = serde_json::to_string(&cfg).unwrap();
    assert!(json.contains("\"type\":\"weighted_sum\""), "{json}");
    assert_eq!(serde_json::from_str::<RewardConfig>(&json).unwrap(), cfg);
}

#[test]
fn invalid_documents_are_rejected() {
    let unknown = parse("[reward]\ntype = \"bonus\"\n")
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("bonus"), "{unknown}");
    let typo = parse("[reward]\ntype = \"outcome\"\nsucess = 1.0\n")
        .unwrap_err()
        .to_string();
    assert!(typo.contains("sucess"), "{typo}");
    let stray = parse("[reward]\ntype = \"format\"\nstrict = true\n")
        .unwrap_err()
        .to_string();
    assert!(stray.contains("strict"), "{stray}");
    let missing = parse("[reward]\ntype = \"length_penalty\"\nper_token = 0.1\n")
        .unwrap_err()
        .to_string();
    assert!(missing.contains("max_generated_tokens"), "{missing}");
    let negative =
        parse("[reward]\ntype = \"length_penalty\"\nmax_generated_tokens = -3\nper_token = 0.1\n");
    assert!(negative.is_err());
    let bad_term = parse(
        "[reward]\ntype = \"weighted_sum\"\n[[reward.terms]]\nreward = { type = \"format\" }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad_term.contains("weight"), "{bad_term}");
}

#[test]
fn invalid_values_are_rejected_with_their_path() {
    let nan = parse("[reward]\ntype = \"outcome\"\nsuccess = nan\n").unwrap();
    assert_eq!(
        config_error(&nan),
        "reward.success must be a finite number, got NaN"
    );
    let positive = RewardConfig::IncompletePunishment(IncompletePunishment { penalty: 0.5 });
    assert!(config_error(&positive).contains("reward.penalty must be <= 0"));
    let negative = RewardConfig::LengthPenalty(LengthPenalty {
        max_generated_tokens: 10,
        per_token: -1.0,
    });
    assert!(config_error(&negative).contains("reward.per_token must be >= 0"));
    let empty = RewardConfig::WeightedSum(WeightedSumConfig { terms: vec![] });
    assert!(config_error(&empty).contains("at least one term"));

    let inf_weight = parse(
        "[reward]\ntype = \"weighted_sum\"\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"format\" }\n[[reward.terms]]\nweight = inf\nreward = { type = \"outcome\" }\n",
    )
    .unwrap();
    assert_eq!(
        config_error(&inf_weight),
        "reward.terms[1].weight must be a finite number, got inf"
    );

    let nested = RewardConfig::WeightedSum(WeightedSumConfig {
        terms: vec![WeightedTermConfig {
            weight: 1.0,
            reward: RewardConfig::WeightedSum(WeightedSumConfig {
                terms: vec![WeightedTermConfig {
                    weight: 1.0,
                    reward: RewardConfig::Outcome(OutcomeReward {
                        success: 1.0,
                        failure: f64::NEG_INFINITY,
                    }),
                }],
            }),
        }],
    });
    assert!(config_error(&nested).starts_with("reward.terms[0].reward.terms[0].reward.failure"));
}

#[test]
fn duplicate_parts_are_rejected_when_building() {
    let dup = parse(
        "[reward]\ntype = \"weighted_sum\"\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n[[reward.terms]]\nweight = 0.5\nreward = { type = \"outcome\", success = 2.0 }\n",
    )
    .unwrap();
    let message = config_error(&dup);
    assert!(
        message.contains("reward.terms[1]") && message.contains("`outcome`"),
        "{message}"
    );

    // Nested sums are fine as long as their parts do not overlap.
    let nested = RewardConfig::WeightedSum(WeightedSumConfig {
        terms: vec![
            WeightedTermConfig {
                weight: 1.0,
                reward: RewardConfig::WeightedSum(WeightedSumConfig {
                    terms: vec![WeightedTermConfig {
                        weight: 1.0,
                        reward: RewardConfig::Format(FormatReward),
                    }],
                }),
            },
            WeightedTermConfig {
                weight: 1.0,
                reward: RewardConfig::WeightedSum(WeightedSumConfig {
                    terms: vec![WeightedTermConfig {
                        weight: 1.0,
                        reward: RewardConfig::Outcome(OutcomeReward {
                            success: 1.0,
                            failure: 0.0,
                        }),
                    }],
                }),
            },
        ],
    });
    assert!(nested.build().is_ok());
}

#[tokio::test]
async fn a_sandboxed_execution_reward_builds_from_toml_and_checks_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("check.sh");
    std::fs::write(&script, "read a; test \"$a\" = 2\n").unwrap();
    let text = format!(
        "[reward]\ntype = \"execution\"\ncommand = [\"sh\", \"check.sh\"]\nsandbox = true\nfiles = [{:?}]\n",
        script.display().to_string()
    );
    let f = parse(&text).unwrap().build().unwrap();
    assert_eq!(f.score(&solved()).await.unwrap().total, 1.0);

    let missing = text.replace("check.sh\"]\n", "nope.sh\"]\n");
    let err = config_error(&parse(&missing).unwrap());
    assert!(
        err.contains("nope.sh") && err.contains("not a file"),
        "{err}"
    );

    let unsandboxed = text.replace("sandbox = true", "sandbox = false");
    let err = config_error(&parse(&unsandboxed).unwrap());
    assert!(
        err.contains("files only applies with sandbox = true"),
        "{err}"
    );
}
