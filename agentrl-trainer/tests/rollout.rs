//! Rollouts of a real (untrained) policy on arith-calc: token-exact trajectories, malformed
//! output handled as invalid actions, stop strings end turns, demonstrations tokenised exactly;
//! multi-turn maze episodes are the same with the history of each turn reused.

use std::sync::Arc;

use agentrl_core::{FinishReason, GenerationRequest, Outcome, Policy, Split, Tool};
use agentrl_env::{ArithExpert, lookup, run_solver_episode};
use agentrl_policy::{
    ByteTokenizer, ChatFormat, EngineOptions, GptConfig, TchPolicy, TinyChatFormat, TinyGpt,
};
use agentrl_tools::Calculator;
use agentrl_trainer::demos::conversation_to_trajectory;
use agentrl_trainer::rollout::{RolloutContext, run_group, run_many};
use tch::{Device, nn};

fn context() -> RolloutContext {
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
    let format = TinyChatFormat::new();
    let detokenizer = Arc::new(move |ids: &[u32]| format.decode(ids));
    let policy = TchPolicy::spawn_with_detokenizer(vs, model, 64, 1, detokenizer).unwrap();
    RolloutContext {
        factory: lookup("arith-calc").unwrap(),
        policy: Arc::new(policy),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: 200,
        stop: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_policy_episodes_are_token_exact_and_never_crash() {
    let ctx = context();
    let task = ctx.factory.task(Split::Train, 0);
    let params = agentrl_core::SamplingParams {
        max_new_tokens: 30,
        ..Default::default()
    };
    let group = run_group(&ctx, &task, 6, &params, 42).await.unwrap();
    assert_eq!(group.len(), 6);
    for t in &group {
        assert_eq!(t.group_id, 42);
        assert!(!t.turns.is_empty());
        assert!(t.turns.len() <= ctx.factory.max_turns());
        assert_eq!(t.token_ids().len(), t.loss_mask().len());
        assert!(t.num_tokens() <= ctx.max_seq_len);
        // The first injected ids are exactly the rendered prompt.
        let first_prompt = ctx
            .format
            .render_prompt(&t.messages[..1], &[Tool::spec(&Calculator)]);
        assert_eq!(t.turns[0].injected_ids, first_prompt);
        for turn in &t.turns {
            assert_eq!(turn.generated_ids.len(), turn.logprobs.len());
            assert!(turn.logprobs.iter().all(|lp| *lp <= 0.0 && lp.is_finite()));
        }
        // An untrained byte model writes garbage: every turn that is not a valid action is
        // flagged, and the episode ends by the env (answer) or the turn limit.
        assert!(
            matches!(t.outcome, Outcome::Completed | Outcome::Truncated),
            "{:?}",
            t.outcome
        );
        assert!(!t.success || t.final_answer().is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_strings_end_turns_at_the_token_that_completes_them() {
    let mut ctx = context();
    // Any lowercase letter ends a turn: a random byte model writes one within a few tokens.
    ctx.stop = ('a'..='z').map(String::from).collect();
    let task = ctx.factory.task(Split::Train, 1);
    let params = agentrl_core::SamplingParams {
        max_new_tokens: 30,
        ..Default::default()
    };
    let group = run_group(&ctx, &task, 6, &params, 7).await.unwrap();
    let has_stop = |ids: &[u32]| {
        let text = ctx.format.decode(ids);
        ctx.stop.iter().any(|s| text.contains(s.as_str()))
    };
    let mut ended_by_a_string = 0;
    for turn in group.iter().flat_map(|t| &t.turns) {
        let ids = &turn.generated_ids;
        let Some((_, before_last)) = ids.split_last() else {
            continue;
        };
        // No stop string before the last token: generation ended as soon as one appeared.
        assert!(!has_stop(before_last), "{:?}", ctx.format.decode(ids));
        if has_stop(ids) {
            assert_eq!(turn.finish, FinishReason::Stop);
            ended_by_a_string += 1;
        }
    }
    assert!(ended_by_a_string > 0, "no turn ended at a stop string");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demonstrations_tokenise_like_a_live_rollout_would() {
    let factory = lookup("arith-calc").unwrap();
    let format = TinyChatFormat::new();
    let task = factory.task(Split::Train, 3);
    let episode = run_solver_episode(factory.as_ref(), &mut ArithExpert, &task)
        .await
        .unwrap();
    let t = conversation_to_trajectory(
        &format,
        &task,
        &episode.messages,
        &episode.tools,
        episode.success,
    );
    assert_eq!(t.turns.len(), 2, "tool call, then answer");
    // Everything up to the last generation equals the prompt the policy would see at the end.
    let last = t.turns.last().unwrap();
    let ids = t.token_ids();
    let before_last = &ids[..ids.len() - last.generated_ids.len()];
    let n_before = episode.messages.len() - 1;
    assert_eq!(
        before_last,
        format.render_prompt(&episode.messages[..n_before], &episode.tools)
    );
    let mask = t.loss_mask();
    let trained: Vec<u32> = ids
        .iter()
        .zip(mask.iter())
        .filter(|(_, m)| **m == 1.0)
        .map(|(i, _)| *i)
        .collect();
    let decoded = format.decode(&trained);
    assert!(
        decoded.contains("calculator{") && decoded.ends_with("<|end|>"),
        "{decoded}"
    );
}

/// A policy on `maze` (every turn continues the episode) with the weights of `weights`, with or
/// without the sessions' keys and values kept between turns.
fn maze_context(weights: &nn::VarStore, reuse: bool) -> (TchPolicy, RolloutContext) {
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = TinyGpt::new(&vs.root(), maze_model()).unwrap();
    vs.copy(weights).unwrap();
    let mut options = EngineOptions::with_max_batch(64);
    if !reuse {
        options.session_cache_bytes = 0;
        options.prompt_cache_bytes = 0;
    }
    let policy = TchPolicy::spawn_with_options(vs, model, options, 1, None).unwrap();
    let ctx = RolloutContext {
        factory: lookup("maze").unwrap(),
        policy: Arc::new(policy.clone()),
        format: Arc::new(TinyChatFormat::new()),
        max_seq_len: 600,
        stop: Vec::new(),
    };
    (policy, ctx)
}

fn maze_model() -> GptConfig {
    GptConfig {
        vocab_size: ByteTokenizer::VOCAB_SIZE,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        max_seq_len: 600,
        ffn_mult: 2,
        rope_theta: 10_000.0,
    }
}

/// Multi-turn episodes played with each turn's history reused are the episodes played with
/// every turn prefilled from scratch (greedy, so scheduling cannot change them), the reuse
/// shows in the engine's counters, and every episode frees its session when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_turn_episodes_reuse_their_history_and_end_their_sessions() {
    let params = agentrl_core::SamplingParams::greedy(24);
    // One set of random weights for both runs (the global libtorch seed is shared with other
    // tests running in parallel, so it cannot make two models equal).
    let weights = nn::VarStore::new(Device::Cpu);
    TinyGpt::new(&weights.root(), maze_model()).unwrap();
    let mut played = Vec::new();
    for reuse in [false, true] {
        let (policy, ctx) = maze_context(&weights, reuse);
        let tasks = (0..3u64)
            .map(|i| (ctx.factory.task(Split::Train, i), i))
            .collect();
        let episodes = run_many(&ctx, tasks, &params).await.unwrap();
        // Commands reach the model thread in order: once this call is answered, the episodes'
        // `end_session`s have been handled too.
        let probe = GenerationRequest::new(vec![1], params.clone());
        policy.generate(vec![probe]).await.unwrap();
        let stats = policy.stats();
        let turns: usize = episodes.iter().map(|t| t.turns.len()).sum();
        assert!(turns > 6, "maze episodes have several turns ({turns})");
        if reuse {
            // Every turn after an episode's first reuses its history.
            assert!(stats.reused_tokens > stats.prefill_tokens, "{stats:?}");
            assert_eq!(stats.cached_sessions, 0, "{stats:?}");
        } else {
            assert_eq!(stats.reused_tokens, 0, "{stats:?}");
        }
        played.push(episodes.iter().map(|t| t.token_ids()).collect::<Vec<_>>());
    }
    assert_eq!(played[0], played[1]);
}
