//! `web-shop`: the reference solver through the browser against the real local site, the
//! WebShop-style reward, malformed actions, determinism and splits.

use std::collections::HashSet;

use agentrl_core::{Env, Message, Split, Step, ToolCall};
use agentrl_env::web_shop::{Purchase, Store, reward, shop_of};
use agentrl_env::{EnvFactory, WebShop, lookup, run_solver_episode};
use serde_json::{Value, json};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn reference_solver_buys_the_right_product() {
    let rt = runtime();
    let factory = lookup("web-shop").unwrap();
    let mut solver = factory.solver(0);
    let n = 40;
    let mut steps = 0;
    let solved = (0..n)
        .filter(|&i| {
            let task = factory.task(Split::Test, i);
            let episode = rt
                .block_on(run_solver_episode(&*factory, &mut *solver, &task))
                .unwrap();
            steps += episode.steps;
            episode.success
        })
        .count();
    println!("web-shop reference solver: {solved}/{n}, {steps} steps in all");
    assert!(solved * 100 >= 95 * n as usize, "{solved}/{n}");
}

#[test]
fn tasks_are_deterministic_seeded_and_split() {
    let (a, b) = (lookup("web-shop").unwrap(), lookup("web-shop").unwrap());
    for i in 0..50 {
        for split in [Split::Train, Split::Test] {
            let task = a.task(split, i);
            assert_eq!(task, b.task(split, i));
            assert_eq!((task.env_id.as_str(), task.split), ("web-shop", split));
        }
    }
    let (one, two) = (WebShop::new(1), WebShop::new(2));
    let differing = (0..50)
        .filter(|&i| one.task(Split::Train, i).data != two.task(Split::Train, i).data)
        .count();
    assert!(differing > 40, "{differing}");
    let set = |split| -> HashSet<String> {
        (0..500)
            .map(|i| a.task(split, i).data.to_string())
            .collect()
    };
    let (train, test) = (set(Split::Train), set(Split::Test));
    assert!(train.is_disjoint(&test));
    assert!(train.len() > 450 && test.len() > 450);
}

#[test]
fn reward_is_the_matched_share_times_the_price_condition() {
    let task = lookup("web-shop").unwrap().task(Split::Test, 4);
    let shop = shop_of(&task).unwrap();
    let w = shop.wish.clone();
    let store = |product: &str, size: &str, colour: &str| Store {
        shop: shop.clone(),
        purchase: Some(Purchase {
            product: product.into(),
            size: size.into(),
            colour: colour.into(),
        }),
    };
    let target = shop
        .products
        .iter()
        .find(|p| shop.score(p, &w.size, &w.colour) == 1.0)
        .unwrap();
    assert_eq!(reward(&store(&target.id, &w.size, &w.colour)), 1.0);
    let other_size = target.sizes.iter().find(|s| **s != w.size).unwrap();
    assert_eq!(reward(&store(&target.id, other_size, &w.colour)), 0.8);
    assert_eq!(
        reward(&Store {
            shop: shop.clone(),
            purchase: None
        }),
        0.0
    );
    for p in shop.products.iter().filter(|p| p.id != target.id) {
        let score = shop.score(p, &w.size, &w.colour);
        assert!(score < 1.0, "{p:?}");
        if p.price > w.max_price {
            assert_eq!(score, 0.0);
        }
    }
}

fn browse(args: Value) -> Message {
    Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "browser", &args)])
}

async fn started(index: u64) -> (Box<dyn Env>, String) {
    let factory = lookup("web-shop").unwrap();
    let mut env = factory.make();
    let obs = env.reset(&factory.task(Split::Test, index)).await.unwrap();
    assert_eq!(obs.tools[0].name(), "browser");
    let text = obs.messages[0].text();
    let url = text
        .split_once("Shop at ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (env, url)
}

fn assert_invalid(step: &Step) {
    assert!(
        step.info.invalid_action.is_some() && !step.done(),
        "{step:?}"
    );
    assert!(
        step.messages.iter().any(|m| m.text().contains("error")),
        "{step:?}"
    );
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let (mut env, url) = started(0).await;
    let mut raw = ToolCall::new("c1", "browser", &json!({}));
    raw.function.arguments = "{not json".into();
    for action in [
        Message::assistant_tool_calls(None, vec![raw]),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "buy", &json!({}))]),
        browse(json!({"action": "fly"})),
        browse(json!({"action": "click", "link": 1})),
        browse(json!({"action": "open", "url": "http://example.invalid/"})),
        Message::assistant("buy the hoodie"),
        Message::assistant(""),
        Message::user("hi"),
    ] {
        assert_invalid(&env.step(&action).await.unwrap());
    }
    let home = env
        .step(&browse(json!({"action": "open", "url": url})))
        .await
        .unwrap();
    assert!(
        home.messages[0].text().contains("Title: Web Shop"),
        "{home:?}"
    );
    assert_invalid(
        &env.step(&browse(json!({"action": "click", "link": 9})))
            .await
            .unwrap(),
    );
    let wrong_field = browse(json!({"action": "submit", "fields": {"query": "x"}}));
    assert_invalid(&env.step(&wrong_field).await.unwrap());
}

#[tokio::test]
async fn buying_a_wrong_option_ends_with_partial_reward() {
    let factory = lookup("web-shop").unwrap();
    let task = factory.task(Split::Test, 6);
    let shop = shop_of(&task).unwrap();
    let w = &shop.wish;
    let target = shop
        .products
        .iter()
        .find(|p| shop.score(p, &w.size, &w.colour) == 1.0)
        .unwrap();
    let other_colour = target.colours.iter().find(|c| **c != w.colour);
    let mut env = factory.make();
    let obs = env.reset(&task).await.unwrap();
    let url = obs.messages[0]
        .text()
        .split_once("Shop at ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let product = format!("{url}product/{}", target.id);
    let page = env
        .step(&browse(json!({"action": "open", "url": product})))
        .await
        .unwrap();
    assert!(page.messages[0].text().contains(&target.title), "{page:?}");
    let bad = env
        .step(&browse(
            json!({"action": "fill", "fields": {"size": "XXL"}}),
        ))
        .await
        .unwrap();
    assert_invalid(&bad);
    let colour = other_colour.unwrap_or(&w.colour);
    let fields = json!({"size": w.size, "colour": colour});
    let end = env
        .step(&browse(json!({"action": "submit", "fields": fields})))
        .await
        .unwrap();
    assert!(
        end.terminated && end.messages[0].text().contains("Order placed"),
        "{end:?}"
    );
    let expected = if other_colour.is_some() { 0.8 } else { 1.0 };
    assert_eq!(end.reward, expected);
    assert_eq!(end.info.success, Some(expected == 1.0));
}

#[tokio::test]
async fn a_second_episode_in_a_session_starts_clean() {
    let factory = lookup("web-shop").unwrap();
    let mut env = factory.make();
    let first = env.reset(&factory.task(Split::Test, 1)).await.unwrap();
    let url = first.messages[0]
        .text()
        .split_once("Shop at ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    env.step(&browse(json!({"action": "open", "url": url})))
        .await
        .unwrap();
    env.step(&browse(
        json!({"action": "submit", "fields": {"q": "hoodie"}}),
    ))
    .await
    .unwrap();
    let task = factory.task(Split::Test, 2);
    let second = env.reset(&task).await.unwrap();
    assert!(
        second.messages[0]
            .text()
            .contains(&format!("Shop at {url} ")),
        "the site is reused"
    );
    assert_invalid(&env.step(&browse(json!({"action": "back"}))).await.unwrap());
    assert_invalid(
        &env.step(&browse(json!({"action": "click", "link": 1})))
            .await
            .unwrap(),
    );
    // The reference solver, replaying from the second episode's start, finishes it.
    let mut solver = factory.solver(0);
    let mut history = second.messages;
    for _ in 0..factory.max_turns() {
        let action = solver.act(&task, &history);
        let step = env.step(&action).await.unwrap();
        history.push(action);
        history.extend(step.messages.iter().cloned());
        if step.done() {
            assert_eq!((step.info.success, step.reward), (Some(true), 1.0));
            return;
        }
    }
    panic!("the second episode did not end");
}
