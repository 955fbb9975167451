//! Rollouts of a real (untrained) policy against arith-calc sessions served over the env HTTP
//! protocol: token-exact trajectories, and env replies identical to an in-process env's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrl_core::{Env, Outcome, Role, SamplingParams, Split, Tool};
use agentrl_env::protocol::{ClientConfig, ProtocolClient, RemoteEnvFactory, ServerConfig, serve};
use agentrl_env::{EnvFactory, lookup};
use agentrl_policy::{ByteTokenizer, GptConfig, TchPolicy, TinyChatFormat, TinyGpt};
use agentrl_tools::Calculator;
use agentrl_trainer::rollout::{RolloutContext, run_many};
use tch::{Device, nn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_env_rollouts_are_token_exact() {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (addr, handle) = serve(
        addr,
        vec![lookup("arith-calc").unwrap()],
        ServerConfig::default(),
    )
    .await
    .unwrap();
    let client = ProtocolClient::new(&addr.to_string(), &ClientConfig::default()).unwrap();
    let factory = Arc::new(RemoteEnvFactory::new(client, lookup("arith-calc").unwrap()));

    tch::manual_seed(5);
    let vs = nn::VarStore::new(Device::Cpu);
    let cfg = GptConfig {
        vocab_size: ByteTokenizer::VOCAB_SIZE,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        max_seq_len: 200,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    };
    let model = TinyGpt::new(&vs.root(), cfg).unwrap();
    let policy = TchPolicy::spawn(vs, model, 64, 1).unwrap();
    let ctx = RolloutContext {
        factory: factory.clone(),
        policy: Arc::new(policy),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: 200,
        stop: Vec::new(),
    };
    let params = SamplingParams {
        max_new_tokens: 30,
        ..Default::default()
    };
    let tasks: Vec<_> = (0..8)
        .map(|i| (ctx.factory.task(Split::Train, i / 2), i / 2))
        .collect();
    let trajectories = run_many(&ctx, tasks.clone(), &params).await.unwrap();
    assert_eq!(trajectories.len(), tasks.len());

    let local = lookup("arith-calc").unwrap();
    for ((task, group), t) in tasks.iter().zip(&trajectories) {
        assert_eq!((&t.task_id, t.group_id), (&task.id, *group));
        assert!(!t.turns.is_empty());
        assert!(t.turns.len() <= ctx.factory.max_turns());
        assert_eq!(t.token_ids().len(), t.loss_mask().len());
        assert!(t.num_tokens() <= ctx.max_seq_len);
        let first_prompt = ctx
            .format
            .render_prompt(&t.messages[..1], &[Tool::spec(&Calculator)]);
        assert_eq!(t.turns[0].injected_ids, first_prompt);
        for turn in &t.turns {
            assert_eq!(turn.generated_ids.len(), turn.logprobs.len());
            assert!(turn.logprobs.iter().all(|lp| *lp <= 0.0 && lp.is_finite()));
        }
        assert!(
            matches!(t.outcome, Outcome::Completed | Outcome::Truncated),
            "{:?}",
            t.outcome
        );
        assert!(!t.success || t.final_answer().is_some());

        // Replaying the actions on an in-process env gives exactly the recorded env replies.
        let mut env = local.make();
        let obs = env.reset(task).await.unwrap();
        let mut i = obs.messages.len();
        assert_eq!(t.messages[..i], obs.messages[..]);
        for _ in &t.turns {
            let action = &t.messages[i];
            assert_eq!(action.role, Role::Assistant);
            i += 1;
            let step = env.step(action).await.unwrap();
            assert_eq!(t.messages[i..i + step.messages.len()], step.messages[..]);
            i += step.messages.len();
        }
        assert_eq!(i, t.messages.len());
    }

    // Episodes cut short on the trainer's side (context full) cancel their remote sessions.
    let deadline = Instant::now() + Duration::from_secs(5);
    while handle.server().session_count() > 0 {
        assert!(Instant::now() < deadline, "remote sessions left behind");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_server_cli_serves_until_interrupted() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrl"))
        .args(["env-server", "--env", "arith-calc", "--addr", "127.0.0.1:0"])
        .args(["--session-ttl-secs", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    let factory = RemoteEnvFactory::connect(&url, "arith-calc", &ClientConfig::default())
        .await
        .unwrap();
    let indices = factory
        .client()
        .get_indices("arith-calc", Split::Test)
        .await
        .unwrap();
    assert_eq!(indices.len(), 200);
    let task = factory.task(Split::Test, 1);
    let mut expert = factory.solver(0);
    let episode = agentrl_env::run_solver_episode(&factory, &mut *expert, &task)
        .await
        .unwrap();
    assert!(episode.success);

    // Ctrl-C (SIGINT to the child we started) stops it cleanly.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "env server did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        "env server stopped"
    );
}
