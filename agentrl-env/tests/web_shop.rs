//! `web-shop`: the reference solver through the browser against the real local site, the
//! WebShop-style reward, malformed actions, determinism and splits.

use agentrl_core::{Env, Message, Split, Step, ToolCall};
use agentrl_env::web_shop::{Purchase, Store, reward, shop_of};
use agentrl_env::{WebShop, lookup};
use serde_json::{Value, json};

use crate::common::contract::{
    assert_all_invalid, assert_disjoint_splits, assert_invalid, assert_reference_solver,
    assert_same_tasks, assert_seeds_differ, task_data, unparsable_call,
};

#[tokio::test]
async fn reference_solver_buys_the_right_product() {
    let factory = lookup("web-shop").unwrap();
    let episodes = assert_reference_solver(&*factory, 40, 95).await;
    let steps: usize = episodes.iter().map(|e| e.steps).sum();
    println!("web-shop reference solver: {steps} steps in all");
}

#[test]
fn tasks_are_deterministic_seeded_and_split() {
    let (a, b) = (lookup("web-shop").unwrap(), lookup("web-shop").unwrap());
    assert_same_tasks(&*a, &*b, &[Split::Train, Split::Test], 50);
    assert_seeds_differ(&WebShop::new(1), &WebShop::new(2), 40);
    assert_disjoint_splits(&*a, 500, task_data, 450, 450);
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

/// The shop's URL, from the statement of an episode.
fn shop_url(statement: &Message) -> String {
    statement
        .text()
        .split_once("Shop at ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

async fn started(index: u64) -> (Box<dyn Env>, String) {
    let factory = lookup("web-shop").unwrap();
    let mut env = factory.make();
    let obs = env.reset(&factory.task(Split::Test, index)).await.unwrap();
    assert_eq!(obs.tools[0].name(), "browser");
    let url = shop_url(&obs.messages[0]);
    (env, url)
}

/// Steps `action`, asserting it is answered as an invalid action.
async fn assert_refused(env: &mut Box<dyn Env>, action: Value) {
    let step: Step = env.step(&browse(action)).await.unwrap();
    assert_invalid("browser", &step);
}

#[tokio::test]
async fn malformed_actions_get_error_observations() {
    let (mut env, url) = started(0).await;
    let actions = [
        unparsable_call("browser"),
        Message::assistant_tool_calls(None, vec![ToolCall::new("c1", "buy", &json!({}))]),
        browse(json!({"action": "fly"})),
        browse(json!({"action": "click", "link": 1})),
        browse(json!({"action": "open", "url": "http://example.invalid/"})),
        Message::assistant("buy the hoodie"),
        Message::assistant(""),
        Message::user("hi"),
    ];
    assert_all_invalid(&mut env, &actions).await;
    let home = env
        .step(&browse(json!({"action": "open", "url": url})))
        .await
        .unwrap();
    assert!(
        home.messages[0].text().contains("Title: Web Shop"),
        "{home:?}"
    );
    assert_refused(&mut env, json!({"action": "click", "link": 9})).await;
    assert_refused(
        &mut env,
        json!({"action": "submit", "fields": {"query": "x"}}),
    )
    .await;
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
    let url = shop_url(&obs.messages[0]);
    let product = format!("{url}product/{}", target.id);
    let page = env
        .step(&browse(json!({"action": "open", "url": product})))
        .await
        .unwrap();
    assert!(page.messages[0].text().contains(&target.title), "{page:?}");
    assert_refused(
        &mut env,
        json!({"action": "fill", "fields": {"size": "XXL"}}),
    )
    .await;
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
    let url = shop_url(&first.messages[0]);
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
    assert_refused(&mut env, json!({"action": "back"})).await;
    assert_refused(&mut env, json!({"action": "click", "link": 1})).await;
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
