//! Run configs: the shipped configs parse; bad values give clear errors.

use agentrl_trainer::config::RunConfig;

#[test]
fn the_demo_config_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
    let cfg = RunConfig::load(&path).unwrap();
    assert_eq!(cfg.env.id, "arith-calc");
    assert!(cfg.eval.tasks >= 200);
    cfg.reward.build().unwrap();
}

/// Every `.toml` file under `dir`, in subfolders too.
fn toml_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(toml_files(&path));
        } else if path.extension().is_some_and(|e| e == "toml") {
            found.push(path);
        }
    }
    found
}

#[test]
fn every_shipped_config_parses_with_its_demonstrators_and_reward() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut configs = toml_files(&root.join("configs"));
    configs.extend(toml_files(&root.join("examples")));
    assert!(configs.len() >= 10, "{configs:?}");
    for path in configs {
        // Loading also asks each env of a mixture whether it knows its demonstrator's knobs.
        let cfg = RunConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        cfg.reward
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
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
        // The demo is asynchronous (max_staleness = 1).
        (
            set(base, "pipeline", "deterministic", "true"),
            "pipeline.deterministic",
        ),
        (
            set(base, "sft", "warmup_steps", "100000"),
            "sft.warmup_steps",
        ),
        (
            set(base, "pipeline", "policy_threads", "0"),
            "pipeline.policy_threads",
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

/// Every run config (`.toml` other than Cargo's) under the repository's `configs/` and
/// `examples/` folders.
fn run_configs_in_the_repository() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "toml")
                && path.file_name().is_some_and(|n| n != "Cargo.toml")
            {
                out.push(path);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in ["configs", "examples"] {
        walk(&root.join(dir), &mut out);
    }
    out.sort();
    out
}

#[test]
fn every_run_config_in_the_repository_parses_builds_its_reward_and_round_trips() {
    // Paths inside configs (a dataset file) are relative to where agentrl runs: the root.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::set_current_dir(&root).unwrap();
    let configs = run_configs_in_the_repository();
    assert!(configs.len() >= 3, "{configs:?}");
    for path in configs {
        let cfg = RunConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        cfg.reward.build().unwrap();
        agentrl_trainer::envs::env_factory(&cfg.env).unwrap();
        // The copy a run writes into its directory reads back as the same config.
        let text = toml::to_string_pretty(&cfg).unwrap();
        let again = RunConfig::from_toml_str(&text, "copy").unwrap();
        assert_eq!(
            toml::to_string_pretty(&again).unwrap(),
            text,
            "{}",
            path.display()
        );
    }
}

#[test]
fn the_model_is_a_tiny_gpt_or_a_pretrained_model_never_both() {
    use agentrl_trainer::config::ModelSource;
    let base = include_str!("../../configs/demo.toml");
    let cfg = RunConfig::from_toml_str(base, "demo.toml").unwrap();
    match &cfg.model.source {
        ModelSource::Tiny(shape) => assert_eq!((shape.d_model, shape.n_layers), (96, 3)),
        other => panic!("{other:?}"),
    }
    let both = set(base, "model", "pretrained", "\"model.gguf\"");
    let err = RunConfig::from_toml_str(&both, "demo.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("model.d_model") && err.contains("pretrained"),
        "{err}"
    );
    let template = set(base, "model", "chat_template", "\"t.jinja\"");
    let err = RunConfig::from_toml_str(&template, "demo.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.chat_template"), "{err}");
}

#[test]
fn sampling_and_estimator_settings_are_typed() {
    use agentrl_trainer::advantage::AdvantageEstimator;
    use agentrl_trainer::config::AdvantageConfig;
    let base = include_str!("../../configs/demo.toml");
    let cfg = RunConfig::from_toml_str(base, "demo.toml").unwrap();
    assert_eq!(cfg.rl.sampling.temperature, 1.0);
    assert_eq!(cfg.rl.sampling.max_new_tokens, 40);
    assert_eq!(
        cfg.eval.sampling.temperature, 0.0,
        "evaluation is greedy by default"
    );
    assert_eq!(cfg.eval.sampling.max_new_tokens, 40);
    assert_eq!(
        cfg.rl.advantage,
        AdvantageConfig::Group {
            estimator: AdvantageEstimator::Grpo,
            task_normalization: true
        }
    );
    let ppo = set(
        &set(base, "rl", "advantage", "\"gae\""),
        "rl",
        "gae_lambda",
        "0.9",
    );
    let cfg = RunConfig::from_toml_str(&ppo, "ppo.toml").unwrap();
    let gae = cfg.rl.advantage.gae().unwrap();
    assert_eq!((gae.lambda, gae.gamma, gae.value_clip), (0.9, 1.0, 0.2));
    assert!(!cfg.rl.advantage.task_normalization());
    // A parameter of another estimator is named.
    let stray = set(base, "rl", "gae_lambda", "0.9");
    let err = RunConfig::from_toml_str(&stray, "demo.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rl.gae_lambda") && err.contains("gae"),
        "{err}"
    );
    let hot = set(base, "eval", "temperature", "-1.0");
    let err = RunConfig::from_toml_str(&hot, "demo.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("eval.temperature"), "{err}");
}

#[test]
fn sft_is_optional_until_a_command_needs_it() {
    let base = include_str!("../../configs/demo.toml");
    let start = base.find("[sft]").unwrap();
    let end = base.find("[rl]").unwrap();
    let without = format!("{}{}", &base[..start], &base[end..]);
    let cfg = RunConfig::from_toml_str(&without, "no-sft.toml").unwrap();
    assert!(cfg.sft.is_none());
    let err = cfg.sft().unwrap_err().to_string();
    assert!(err.contains("[sft]"), "{err}");
}

#[test]
fn a_config_can_start_from_a_base() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
    std::fs::copy(&demo, dir.path().join("demo.toml")).unwrap();
    std::fs::create_dir(dir.path().join("variants")).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    // Tables merge key by key; arrays replace; a base may have a base.
    let child = write(
        "variants/lower-lr.toml",
        "base = \"../demo.toml\"\nseed = 7\n[rl]\nlr = 1e-5\n[[reward.terms]]\nweight = 1.0\nreward = { type = \"outcome\" }\n",
    );
    let cfg = RunConfig::load(&child).unwrap();
    let demo_cfg = RunConfig::load(&demo).unwrap();
    assert_eq!(cfg.seed, 7);
    assert_eq!(cfg.rl.lr, 1e-5);
    assert_eq!(
        cfg.rl.group_size, demo_cfg.rl.group_size,
        "the rest of [rl] is the base's"
    );
    assert_eq!(cfg.model, demo_cfg.model);
    let terms = |cfg: &RunConfig| {
        toml::to_string(cfg)
            .unwrap()
            .matches("[[reward.terms]]")
            .count()
    };
    assert_eq!(
        (terms(&demo_cfg), terms(&cfg)),
        (2, 1),
        "an array replaces the base's"
    );
    let grandchild = write(
        "variants/sync.toml",
        "base = \"lower-lr.toml\"\n[pipeline]\nmax_staleness = 0\n",
    );
    let cfg = RunConfig::load(&grandchild).unwrap();
    assert_eq!(
        (cfg.seed, cfg.rl.lr, cfg.pipeline.max_staleness),
        (7, 1e-5, 0)
    );

    let missing = write("variants/missing.toml", "base = \"nope.toml\"\n");
    let err = RunConfig::load(&missing).unwrap_err().to_string();
    assert!(
        err.contains("missing.toml") && err.contains("nope.toml"),
        "{err}"
    );
    let looped = write("variants/loop.toml", "base = \"loop.toml\"\n");
    let err = RunConfig::load(&looped).unwrap_err().to_string();
    assert!(err.contains("loop"), "{err}");
    let bad_key = write(
        "variants/bad.toml",
        "base = \"../demo.toml\"\n[rl]\nbogus = 1\n",
    );
    let err = RunConfig::load(&bad_key).unwrap_err().to_string();
    assert!(err.contains("bogus") && err.contains("bad.toml"), "{err}");
}

#[test]
fn the_sft_learning_rate_warms_up_then_decays_to_a_tenth() {
    let base = include_str!("../../configs/demo.toml");
    let with = |warmup: &str| {
        let text = set(
            &set(base, "sft", "steps", "100"),
            "sft",
            "warmup_steps",
            warmup,
        );
        let cfg = RunConfig::from_toml_str(&text, "demo.toml").unwrap();
        cfg.sft.expect("the demo has [sft]")
    };
    let plain = with("0");
    let peak = plain.lr;
    // Without warmup: the cosine from the first step, as before the option existed.
    for step in [0usize, 37, 99] {
        let progress = step as f64 / 100.0;
        let cosine = peak * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()));
        assert_eq!(plain.lr_at(step).to_bits(), cosine.to_bits(), "step {step}");
    }
    let warm = with("10");
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(warm.lr_at(0), peak / 10.0));
    assert!(close(warm.lr_at(4), peak / 2.0));
    assert!(close(warm.lr_at(9), peak));
    assert!(close(warm.lr_at(10), peak), "the decay starts at the peak");
    let last = warm.lr_at(99);
    assert!(last > 0.1 * peak && last < 0.11 * peak, "{last}");
    assert!(
        close(warm.lr_at(55), 0.55 * peak),
        "halfway through the decay"
    );
}
