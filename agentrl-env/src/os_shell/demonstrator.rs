//! The imperfect `os-shell` demonstrator: the reference solver, or, as a habit decided once
//! per task, a user who runs its command on the top folder only and forgets the subfolders.

use agentrl_core::Result;

use super::{OS_SHELL_ID, next_action};
use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::one_habit::OneHabitDemonstrator;

/// Knob: probability of looking at the top folder only on a task.
const TOP_FOLDER_ONLY_PROB: &str = "top_folder_only_prob";

/// The knobs of [`shell_demonstrator`] (name, doc).
pub const SHELL_DEMONSTRATOR_KNOBS: &[KnobDoc] = &[(
    TOP_FOLDER_ONLY_PROB,
    "probability, on a task, of running its command on the top folder only, never in \
     subfolders: it counts matching logs with `grep -l WORD logs/*.log` and renames \
     `notes/*.txt`, missing `logs/archive/` and `notes/drafts/` (default 0)",
)];

/// The imperfect demonstrator that `knobs` describe (see [`SHELL_DEMONSTRATOR_KNOBS`]), seeded
/// by `seed`: its mistake is a habit, so that a cloned policy keeps it under greedy decoding
/// and RL has something to unlearn. A missing knob turns the habit off; an unknown knob or a
/// value outside `[0, 1]` is an [`Error::Config`](agentrl_core::Error::Config) naming the knob.
///
/// Once per task (on its first turn) it decides, with probability `top_folder_only_prob`, to
/// look at the top folder only: counting the logs that contain a word it greps `logs/*.log`,
/// and renaming `.txt` notes it loops over `notes/*.txt`, so the files in subfolders are left
/// out, which fails the task whenever a subfolder holds one that counts. The questions about
/// `data/`, which has no subfolders, it answers like the reference solver. Otherwise it plays
/// like [`super::ShellExpert`].
pub fn shell_demonstrator(seed: u64, knobs: &DemonstratorKnobs) -> Result<OneHabitDemonstrator> {
    OneHabitDemonstrator::from_knobs(
        OS_SHELL_ID,
        SHELL_DEMONSTRATOR_KNOBS,
        knobs,
        seed,
        next_action,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demonstrator::test_support::{
        assert_half_habit_between, assert_knob_error,
        assert_reference_without_knobs_and_repeatable, play, require_bwrap, success_rates,
    };
    use crate::factory::SolverEpisode;
    use crate::os_shell::{OsShell, Question, ShellTask, generate};
    use agentrl_core::Split;
    use serde_json::json;

    /// Number of train tasks the rates are measured on.
    const TASKS: u64 = 60;

    /// Train task `index` of the default factory.
    fn shell_task(index: u64) -> ShellTask {
        generate(OsShell::default().seed, Split::Train, index)
    }

    /// Whether a file in a subfolder counts for the task: a log under `logs/archive/` with
    /// the word, or a `.txt` note under `notes/drafts/`.
    fn subfolder_counts(task: &ShellTask) -> bool {
        task.files
            .iter()
            .any(|(path, content)| match &task.question {
                Question::CountMatching { word } => {
                    path.starts_with("logs/archive/")
                        && path.ends_with(".log")
                        && content.contains(word.as_str())
                }
                Question::RenameTxt => path.starts_with("notes/drafts/") && path.ends_with(".txt"),
                Question::LargestFile | Question::CountLines => false,
            })
    }

    /// The shell commands of `episode`.
    fn commands(episode: &SolverEpisode) -> Vec<String> {
        crate::transcript::exchanges(&episode.messages, "shell")
            .into_iter()
            .filter_map(|x| Some(x.args.get("command")?.as_str()?.to_string()))
            .collect()
    }

    #[tokio::test]
    async fn the_top_folder_only_misses_files_in_subfolders() {
        require_bwrap();
        let factory = OsShell::default();
        let affected = |index: u64| subfolder_counts(&shell_task(index));
        let share = (0..TASKS).filter(|&i| affected(i)).count();
        assert!(share >= 12, "too few tasks to tell: {share}/{TASKS}");
        let on = play(&factory, json!({ TOP_FOLDER_ONLY_PROB: 1.0 }), 2, TASKS).await;
        for (index, episode) in (0..).zip(&on) {
            let commands = commands(episode);
            assert_eq!(commands.len(), 1, "task {index}: {commands:?}");
            let looks_deep = commands[0].contains("grep -r") || commands[0].contains("find logs");
            assert!(!looks_deep, "task {index}: {commands:?}");
            if matches!(shell_task(index).question, Question::RenameTxt) {
                assert!(
                    commands[0].starts_with("for f in notes/*.txt"),
                    "{commands:?}"
                );
            }
            assert_eq!(episode.success, !affected(index), "task {index}");
        }
        let (all, hit) = success_rates(&on, affected);
        assert_eq!(hit, 0.0);
        assert_half_habit_between(
            &factory,
            json!({ TOP_FOLDER_ONLY_PROB: 0.5 }),
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
        let knobs = json!({ TOP_FOLDER_ONLY_PROB: 0.5 });
        assert_reference_without_knobs_and_repeatable(&OsShell::default(), knobs).await;
    }

    #[test]
    fn bad_knobs_name_the_env_and_the_knob() {
        for (knobs, knob) in [
            (json!({ "no_recurse_prob": 0.5 }), "`no_recurse_prob`"),
            (
                json!({ TOP_FOLDER_ONLY_PROB: 1.5 }),
                "`top_folder_only_prob`",
            ),
            (
                json!({ TOP_FOLDER_ONLY_PROB: true }),
                "`top_folder_only_prob`",
            ),
        ] {
            let knobs = knobs.as_object().cloned().unwrap_or_default();
            assert_knob_error(shell_demonstrator(0, &knobs), "os-shell", knob);
        }
    }
}
