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

/// `base` with the value of `key` in table `[table]` replaced by `value` (or a new key added).
fn set(base: &str, table: &str, key: &str, value: &str) -> String {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut done = false;
    for line in base.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            if current == table && !done {
                out.push(format!("{key} = {value}"));
                done = true;
            }
            current = trimmed.trim_matches(|c| c == '[' || c == ']').to_string();
        }
        if current == table && trimmed.split('=').next().map(str::trim) == Some(key) {
            out.push(format!("{key} = {value}"));
            done = true;
            continue;
        }
        out.push(line.to_string());
    }
    assert!(done, "no table [{table}] in the demo config");
    out.join("\n")
}

#[test]
fn bad_configs_name_the_problem() {
    let base = include_str!("../../configs/demo.toml");
    let cases = [
        (set(base, "rl", "group_size", "1"), "group_size"),
        (set(base, "rl", "lr", "-1.0"), "rl.lr"),
        (
            set(base, "sft.demonstrator", "copy_error_prob", "1.5"),
            "copy_error_prob",
        ),
        (set(base, "rl", "bogus", "1"), "bogus"),
        (set(base, "model", "d_model", "\"wide\""), "d_model"),
        (
            set(base, "model", "stop", "[\"ok\", \"\"]"),
            "model.stop[1]",
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
