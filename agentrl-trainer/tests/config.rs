//! Run configs: the shipped demo config parses; bad values give clear errors.

use agentrl_trainer::config::RunConfig;

#[test]
fn the_demo_config_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
    let cfg = RunConfig::load(&path).unwrap();
    assert_eq!(cfg.env.id, "arith-calc");
    assert!(cfg.eval.tasks >= 200);
    cfg.reward.build().unwrap();
}

#[test]
fn bad_configs_name_the_problem() {
    let base = include_str!("../../configs/demo.toml");
    let cases = [
        (
            base.replace("group_size = 8", "group_size = 1"),
            "group_size",
        ),
        (base.replace("lr = 5e-4", "lr = -1.0"), "rl.lr"),
        (
            base.replace("copy_error_prob = 0.1", "copy_error_prob = 1.5"),
            "copy_error_prob",
        ),
        (base.replace("[rl]", "[rl]\nbogus = 1"), "bogus"),
        (
            base.replace("d_model = 96", "d_model = \"wide\""),
            "d_model",
        ),
    ];
    for (text, needle) in cases {
        let err = RunConfig::from_toml_str(&text, "demo.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(needle) && err.contains("demo.toml"),
            "{needle}: {err}"
        );
    }
    let missing = RunConfig::load(std::path::Path::new("no/such/run.toml"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("no/such/run.toml"), "{missing}");
}
