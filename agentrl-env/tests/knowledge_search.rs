//! `knowledge-search`: the reference solver over the real search index, the answer checker,
//! determinism, disjoint splits, two-hop questions and malformed actions.

use std::sync::Arc;
use std::time::Instant;

use agentrl_core::{Env, Message, Role, Split, Step};
use agentrl_env::knowledge_search::{Corpus, KnowledgeSearch, Question, SEARCH_LIMITS};
use agentrl_env::{EnvFactory, lookup, run_solver_episode};
use agentrl_tools::Search;

use crate::common::contract::{
    assert_disjoint_splits, assert_invalid, assert_reference_solver, assert_same_tasks,
    assert_seeds_differ, raw_call, unparsable_call,
};

const ID: &str = "knowledge-search";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn index_build_time_is_reported() {
    let corpus = Corpus::generate(1234);
    let started = Instant::now();
    let index = corpus.index().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(index.len(), corpus.documents.len());
    eprintln!(
        "knowledge-search: indexed {} articles in {:.1} ms",
        index.len(),
        elapsed.as_secs_f64() * 1000.0
    );
}

#[test]
fn reference_solver_solves_the_test_split() {
    let rt = runtime();
    let n = 100;
    for seed in [0, 3] {
        eprintln!("knowledge-search seed {seed}:");
        let factory = KnowledgeSearch::new(seed);
        let episodes = rt.block_on(assert_reference_solver(&factory, n, 95));
        let searches: usize = episodes.iter().map(|e| tool_texts(&e.messages).len()).sum();
        let hops: usize = (0..n)
            .map(|i| {
                Question::from_task(&factory.task(Split::Test, i))
                    .unwrap()
                    .hops()
            })
            .sum();
        eprintln!("knowledge-search seed {seed}: {searches} searches for {hops} hops");
    }
}

#[test]
fn same_seed_gives_identical_tasks_and_seeds_differ() {
    let (a, b) = (lookup(ID).unwrap(), lookup(ID).unwrap());
    assert_same_tasks(&*a, &*b, &[Split::Train, Split::Test], 100);
    let (one, two) = (KnowledgeSearch::new(1), KnowledgeSearch::new(2));
    assert_seeds_differ(&one, &two, 45);
    assert_ne!(one.corpus().documents, two.corpus().documents);
}

#[test]
fn factories_of_one_seed_share_one_index() {
    let (a, b) = (KnowledgeSearch::new(7), KnowledgeSearch::new(7));
    assert!(Arc::ptr_eq(a.corpus(), b.corpus()));
    assert!(Arc::ptr_eq(
        &a.corpus().index().unwrap(),
        &b.corpus().index().unwrap()
    ));
}

#[test]
fn splits_are_disjoint() {
    let question = |task: &agentrl_core::Task| task.data["question"].to_string();
    assert_disjoint_splits(&*lookup(ID).unwrap(), 400, question, 250, 150);
}

/// The text of the tool messages of an episode, in order.
fn tool_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().to_string())
        .collect()
}

#[test]
fn two_hop_questions_need_two_articles() {
    let rt = runtime();
    let factory = KnowledgeSearch::default();
    let corpus = Arc::clone(factory.corpus());
    let search = Search::new(corpus.index().unwrap(), SEARCH_LIMITS);
    let mut two_hop = 0;
    for i in 0..60 {
        let question = factory.question(Split::Test, i);
        if question.hops() < 2 {
            continue;
        }
        two_hop += 1;
        // No article states both the entity asked about and the answer.
        assert!(
            !corpus.one_article_mentions(&question.start, &question.answer),
            "{question:?}"
        );
        // Searching for the entity asked about does not show the answer.
        let first = search.run(&format!("\"{}\"", question.start), 5).unwrap();
        assert!(!first.contains(&question.answer), "{question:?}\n{first}");
        // The solver needs at least two searches.
        let task = question.to_task(Split::Test, i);
        let mut solver = factory.solver(0);
        let episode = rt
            .block_on(run_solver_episode(&factory, &mut *solver, &task))
            .unwrap();
        let results = tool_texts(&episode.messages);
        assert!(results.len() >= 2, "{question:?}: {results:?}");
    }
    assert!(two_hop >= 15, "only {two_hop} two-hop questions in 60");
}

async fn started() -> (Box<dyn Env>, Question) {
    let factory = KnowledgeSearch::default();
    let question = factory.question(Split::Test, 1);
    let mut env = factory.make();
    let obs = env.reset(&question.to_task(Split::Test, 1)).await.unwrap();
    assert!(obs.messages[0].text().contains(&question.question));
    assert_eq!(obs.tools[0].name(), "search");
    (env, question)
}

async fn final_answer(text: &str) -> Step {
    let (mut env, _) = started().await;
    env.step(&Message::assistant(text)).await.unwrap()
}

#[tokio::test]
async fn checker_accepts_the_answer_and_rejects_others() {
    let (_, question) = started().await;
    let answer = question.answer.clone();
    for (text, success) in [
        (answer.to_uppercase(), true),
        (format!("  {answer}.\n"), true),
        (format!("{answer}x"), false),
        (format!("{answer} or Tarnfield"), false),
        ("I do not know".to_string(), false),
    ] {
        let step = final_answer(&text).await;
        assert!(step.terminated, "{text}");
        assert_eq!(step.info.success, Some(success), "{text}");
        assert_eq!(step.reward, if success { 1.0 } else { 0.0 });
    }
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    for action in [
        unparsable_call("search"),
        raw_call("no_such_tool", "{}"),
        raw_call("search", r#"{"query": 5}"#),
        raw_call("search", r#"{"query": ""}"#),
        raw_call("search", r#"{"query": "nosuchfield:x"}"#),
        raw_call("search", r#"{"query": "a", "limit": 99}"#),
        Message::assistant(""),
        Message::user("hello"),
    ] {
        let (mut env, _) = started().await;
        let step = env.step(&action).await.unwrap();
        assert_invalid(&format!("{action:?}"), &step);
        // The episode goes on: a valid search still works.
        let ok = env
            .step(&raw_call("search", r#"{"query": "river"}"#))
            .await
            .unwrap();
        assert!(ok.info.invalid_action.is_none(), "{ok:?}");
        assert!(ok.messages[0].text().contains("results for"), "{ok:?}");
    }
}

#[tokio::test]
async fn wandering_is_truncated_by_the_turn_limit() {
    let factory = KnowledgeSearch::default();
    let (mut env, _) = started().await;
    let mut last = None;
    for _ in 0..factory.max_turns() {
        let step = env
            .step(&raw_call("search", r#"{"query": "river"}"#))
            .await
            .unwrap();
        let done = step.done();
        last = Some(step);
        if done {
            break;
        }
    }
    let last = last.unwrap();
    assert!(last.truncated && last.done(), "{last:?}");
}

#[cfg(feature = "protocol")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_through_the_http_protocol_match_local_ones() {
    use agentrl_env::protocol::{RemoteEnvFactory, ServerConfig, serve};

    let addr = "127.0.0.1:0".parse().unwrap();
    let (addr, handle) = serve(addr, vec![lookup(ID).unwrap()], ServerConfig::default())
        .await
        .unwrap();
    let remote = RemoteEnvFactory::connect(&format!("http://{addr}"), ID, &Default::default())
        .await
        .unwrap();
    let local = lookup(ID).unwrap();
    for index in 0..10 {
        let task = local.task(Split::Test, index);
        let over_http = run_solver_episode(&remote, &mut *remote.solver(0), &task)
            .await
            .unwrap();
        let here = run_solver_episode(&*local, &mut *local.solver(0), &task)
            .await
            .unwrap();
        assert_eq!(over_http, here);
        assert!(over_http.success, "{over_http:?}");
    }
    handle.shutdown().await.unwrap();
}
