//! The imperfect `code-fix` demonstrator: the reference solver, or, as a habit decided once
//! per task, a programmer who fixes the first bug it finds and calls it done.

use agentrl_core::Result;

use super::{CODE_FIX_ID, next_action};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::one_habit::OneHabitDemonstrator;

/// Knob: probability of fixing only the first planted bug on a task.
const FIRST_BUG_ONLY_PROB: &str = "first_bug_only_prob";

/// The knobs of [`code_fix_demonstrator`] (name, doc).
pub const CODE_FIX_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    FIRST_BUG_ONLY_PROB,
    "probability, on a task, of fixing only the first planted bug (the one in the module's \
     first function), then running the tests and replying `done` even though some still fail \
     (default 0)",
)];

/// The imperfect demonstrator that `knobs` describe (see [`CODE_FIX_DEMONSTRATOR_KNOBS`]),
/// seeded by `seed`: its mistake is a habit, so that a cloned policy keeps it under greedy
/// decoding and RL has something to unlearn. A missing knob turns the habit off; an unknown
/// knob or a value outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming
/// the knob.
///
/// Once per task (on its first turn) it decides, with probability `first_bug_only_prob`, to
/// stop at the first bug: it reads the module, writes it back with only the first planted bug
/// fixed, runs the tests and replies `done` whatever they report. That fails every task with
/// a second bug. Otherwise it plays like [`super::CodeFixExpert`].
pub fn code_fix_demonstrator(seed: u64, knobs: &DemonstratorKnobs) -> Result<OneHabitDemonstrator> {
    OneHabitDemonstrator::from_knobs(
        CODE_FIX_ID,
        CODE_FIX_DEMONSTRATOR_KNOBS,
        knobs,
        seed,
        next_action,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_fix::{CodeFix, Project, apply_fixes, generate};
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable_by, play, require_bwrap, success_rates,
    };
    use crate::factory::SolverEpisode;
    use agentrl_core::{Message, Split};
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 40;

    /// Train task `index` of the default factory.
    fn project(index: u64) -> Project {
        generate(CodeFix::default().seed, Split::Train, index)
    }

    /// The module text `episode` wrote, if it wrote one.
    fn written(episode: &SolverEpisode) -> Option<String> {
        crate::transcript::exchanges(&episode.messages, "write_file")
            .into_iter()
            .find_map(|x| Some(x.args.get("content")?.as_str()?.to_string()))
    }

    /// `episodes` without the test run's time (`Ran 12 tests in 0.006s`), which varies.
    fn untimed(episodes: Vec<SolverEpisode>) -> Vec<SolverEpisode> {
        let time = regex::Regex::new(r"tests? in [0-9.]+s").expect("a valid pattern");
        let text = serde_json::to_string(&episodes).expect("episodes serialise");
        let text = time.replace_all(&text, "tests in a moment");
        serde_json::from_str(&text).expect("episodes read back")
    }

    #[tokio::test]
    async fn stopping_at_the_first_bug_fails_the_tasks_with_two() {
        require_bwrap();
        let factory = CodeFix::default();
        let affected = |index: u64| project(index).bugs.len() > 1;
        let share = (0..TASKS).filter(|&i| affected(i)).count();
        assert!(share >= 10, "too few tasks to tell: {share}/{TASKS}");
        let on = play(&factory, json!({ FIRST_BUG_ONLY_PROB: 1.0 }), 2, TASKS).await;
        for (index, episode) in (0..).zip(&on) {
            let project = project(index);
            let source = &project.files[&project.module_file()];
            let module = written(episode);
            let first_fixed = apply_fixes(source, &project.bugs[..1]);
            assert_eq!(module.as_ref(), Some(&first_fixed), "task {index}");
            let all_fixed = apply_fixes(source, &project.bugs);
            assert_eq!(first_fixed != all_fixed, affected(index), "task {index}");
            assert_eq!(episode.success, !affected(index), "task {index}");
            let last = episode.messages.last().map(Message::text);
            assert_eq!(last, Some("done"), "task {index}: it says done anyway");
        }
        let (all, hit) = success_rates(&on, affected);
        assert_eq!(hit, 0.0);
        assert_half_habit_between(
            &factory,
            json!({ FIRST_BUG_ONLY_PROB: 0.5 }),
            TASKS,
            affected,
            all,
            1.0,
        )
        .await;
    }

    #[tokio::test]
    async fn without_knobs_it_is_the_reference_solver_and_seeds_repeat() {
        require_bwrap();
        let knobs = json!({ FIRST_BUG_ONLY_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable_by(&CodeFix::default(), knobs, untimed).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "skip_tests_prob": 0.5 }), "`skip_tests_prob`"),
            (json!({ FIRST_BUG_ONLY_PROB: -1 }), "`first_bug_only_prob`"),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(code_fix_demonstrator(0, &knobs), "code-fix", knob);
        }
    }
}
