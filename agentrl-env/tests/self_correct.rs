//! `SelfCorrect` on `arith-calc` and `math-reasoning`: retries after wrong answers, feedback
//! and the first-try / corrected counters.

use agentrl_core::{Env, Message, Split, Step};
use agentrl_env::self_correct::{CORRECTED_SUCCESS, FIRST_TRY_SUCCESS};
use agentrl_env::{SelfCorrect, lookup};

fn counter(step: &Step, key: &str) -> u64 {
    step.info.extra[key].as_u64().unwrap()
}

async fn episode(id: &str, answers: &[String], retries: usize) -> Vec<Step> {
    let factory = lookup(id).unwrap();
    let task = factory.task(Split::Test, 4);
    let mut env = SelfCorrect::new(factory.make(), retries);
    env.reset(&task).await.unwrap();
    let mut steps = Vec::new();
    for answer in answers {
        let step = env.step(&Message::assistant(answer.clone())).await.unwrap();
        let done = step.done();
        steps.push(step);
        if done {
            break;
        }
    }
    steps
}

fn answer_of(id: &str) -> i64 {
    let task = lookup(id).unwrap().task(Split::Test, 4);
    task.data["answer"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn wrong_then_right_is_a_corrected_success() {
    for id in ["arith-calc", "math-reasoning"] {
        let right = answer_of(id);
        let answers = [(right + 1).to_string(), right.to_string()];
        let steps = episode(id, &answers, 2).await;
        assert_eq!(steps.len(), 2, "{id}");
        let retry = &steps[0];
        assert!(!retry.done() && retry.info.success.is_none(), "{id}");
        let text = retry.messages.last().unwrap().text();
        assert!(
            text.starts_with("Wrong answer") && text.contains("2 tries left"),
            "{text}"
        );
        let last = &steps[1];
        assert!(last.terminated && last.info.success == Some(true), "{id}");
        assert_eq!(counter(last, FIRST_TRY_SUCCESS), 0);
        assert_eq!(counter(last, CORRECTED_SUCCESS), 1);
    }
}

#[tokio::test]
async fn math_feedback_is_passed_on() {
    let right = answer_of("math-reasoning");
    let steps = episode("math-reasoning", &[(right + 5).to_string()], 1).await;
    let text = steps[0].messages.last().unwrap().text();
    assert!(
        text.contains("too high") && text.contains("1 try left"),
        "{text}"
    );
}

#[tokio::test]
async fn first_try_success_is_counted() {
    for id in ["arith-calc", "math-reasoning"] {
        let steps = episode(id, &[answer_of(id).to_string()], 2).await;
        assert_eq!(steps.len(), 1);
        assert_eq!(counter(&steps[0], FIRST_TRY_SUCCESS), 1);
        assert_eq!(counter(&steps[0], CORRECTED_SUCCESS), 0);
    }
}

#[tokio::test]
async fn retries_run_out() {
    for id in ["arith-calc", "math-reasoning"] {
        let wrong = (answer_of(id) + 1).to_string();
        let steps = episode(id, &vec![wrong; 5], 2).await;
        assert_eq!(steps.len(), 3, "{id}");
        let last = &steps[2];
        assert!(last.terminated && last.info.success == Some(false));
        assert_eq!(counter(last, FIRST_TRY_SUCCESS), 0);
        assert_eq!(counter(last, CORRECTED_SUCCESS), 0);
        assert_eq!(counter(last, "wrong_answers"), 3);
    }
}

#[tokio::test]
async fn invalid_actions_pass_through_without_using_a_try() {
    let right = answer_of("math-reasoning");
    let steps = episode("math-reasoning", &[String::new(), right.to_string()], 0).await;
    assert!(steps[0].info.invalid_action.is_some() && !steps[0].done());
    assert_eq!(steps[1].info.success, Some(true));
    assert_eq!(counter(&steps[1], FIRST_TRY_SUCCESS), 1);
}
