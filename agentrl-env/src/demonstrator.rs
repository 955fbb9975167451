//! Knobs of imperfect demonstrators ([`crate::EnvFactory::demonstrator`]): the type, and
//! checks an env uses to read its own knobs with errors that name the env and the knob.

use agentrl_core::{Error, Message, Result, Role, Task};

/// Settings of an env's imperfect demonstrator, by knob name (e.g. a config's
/// `[sft.demonstrator]` table). Which knobs exist is up to each env.
pub type DemonstratorKnobs = serde_json::Map<String, serde_json::Value>;

/// A knob an env's demonstrator accepts: its name and a one-line doc.
pub type KnobDoc = (&'static str, &'static str);

/// Fails with an [`Error::Config`] naming `env` and the knob when `knobs` has a knob that is
/// not in `known`.
pub fn reject_unknown_knobs(env: &str, knobs: &DemonstratorKnobs, known: &[KnobDoc]) -> Result<()> {
    let Some(unknown) = knobs
        .keys()
        .find(|name| !known.iter().any(|(k, _)| k == name))
    else {
        return Ok(());
    };
    let accepted = if known.is_empty() {
        "it has no demonstrator knobs".to_string()
    } else {
        let names: Vec<&str> = known.iter().map(|(name, _)| *name).collect();
        format!("its knobs are: {}", names.join(", "))
    };
    Err(Error::Config(format!(
        "env `{env}` has no demonstrator knob `{unknown}` ({accepted})"
    )))
}

/// Knob `name` of `knobs` as a probability in `[0, 1]`, or `default` when it is absent; any
/// other value is an [`Error::Config`] naming `env` and the knob.
pub fn probability_knob(
    env: &str,
    knobs: &DemonstratorKnobs,
    name: &str,
    default: f64,
) -> Result<f64> {
    let Some(value) = knobs.get(name) else {
        return Ok(default);
    };
    match value.as_f64() {
        Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(Error::Config(format!(
            "demonstrator knob `{name}` of env `{env}` must be a probability in [0, 1], got {value}"
        ))),
    }
}

/// A choice a demonstrator makes once per task, on the task's first turn, and keeps for the
/// rest of it: how its mistakes become habits that a cloned greedy policy reproduces (a mistake
/// drawn afresh at every step would vanish under greedy decoding).
#[derive(Debug, Clone)]
pub struct PerTaskChoice<T> {
    /// The task in progress (by id) and the choice made for it.
    current: Option<(String, T)>,
}

impl<T> Default for PerTaskChoice<T> {
    fn default() -> Self {
        PerTaskChoice { current: None }
    }
}

impl<T: Copy> PerTaskChoice<T> {
    /// The choice for `task`: `decide()` on its first turn (no assistant message in
    /// `history` yet) or when the task changed, the remembered one after.
    pub fn decide(&mut self, task: &Task, history: &[Message], decide: impl FnOnce() -> T) -> T {
        let first_turn = !history.iter().any(|m| m.role == Role::Assistant);
        match &self.current {
            Some((id, choice)) if !first_turn && *id == task.id => *choice,
            _ => {
                let choice = decide();
                self.current = Some((task.id.clone(), choice));
                choice
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn knobs(value: serde_json::Value) -> DemonstratorKnobs {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn unknown_knobs_name_the_env_and_the_knob() {
        let known = [("p", "a probability")];
        assert!(reject_unknown_knobs("e", &knobs(json!({"p": 0.5})), &known).is_ok());
        let err = reject_unknown_knobs("e", &knobs(json!({"q": 1})), &known).unwrap_err();
        assert!(matches!(err, Error::Config(_)));
        let text = err.to_string();
        assert!(
            text.contains("`e`") && text.contains("`q`") && text.contains("p"),
            "{text}"
        );
        let err = reject_unknown_knobs("e", &knobs(json!({"q": 1})), &[]).unwrap_err();
        assert!(err.to_string().contains("no demonstrator knobs"), "{err}");
    }

    #[test]
    fn a_choice_is_made_on_the_first_turn_and_kept() {
        let task = |id: &str| Task {
            env_id: "e".into(),
            id: id.into(),
            split: agentrl_core::Split::Train,
            data: serde_json::Value::Null,
        };
        let start = [Message::user("go")];
        let later = [Message::user("go"), Message::assistant("step")];
        let mut choice = PerTaskChoice::default();
        assert_eq!(choice.decide(&task("a"), &start, || 1), 1);
        assert_eq!(
            choice.decide(&task("a"), &later, || 2),
            1,
            "kept within the task"
        );
        assert_eq!(
            choice.decide(&task("b"), &later, || 3),
            3,
            "a new task decides again"
        );
        assert_eq!(
            choice.decide(&task("b"), &start, || 4),
            4,
            "so does a new episode"
        );
    }

    #[test]
    fn probabilities_are_checked() {
        let k = knobs(json!({"a": 0.25, "b": 1, "c": 1.5, "d": "x", "e": -0.1}));
        assert_eq!(probability_knob("env", &k, "a", 0.0).unwrap(), 0.25);
        assert_eq!(probability_knob("env", &k, "b", 0.0).unwrap(), 1.0);
        assert_eq!(probability_knob("env", &k, "missing", 0.75).unwrap(), 0.75);
        for bad in ["c", "d", "e"] {
            let err = probability_knob("env", &k, bad, 0.0).unwrap_err();
            assert!(matches!(err, Error::Config(_)));
            let text = err.to_string();
            assert!(
                text.contains("`env`") && text.contains(&format!("`{bad}`")),
                "{text}"
            );
        }
    }
}

/// What the env demonstrators' tests share: playing a demonstrator, success rates over a class
/// of tasks, the reference-solver and determinism check, and the knob-error check.
#[cfg(test)]
pub(crate) mod test_support {
    use agentrl_core::{Error, Split};

    use super::DemonstratorKnobs;
    use crate::factory::{EnvFactory, Solver, SolverEpisode, run_solver_episode};

    /// Episodes of `solver` on train tasks `0..n` of `factory`, in order.
    async fn episodes_of(
        factory: &dyn EnvFactory,
        solver: &mut dyn Solver,
        n: u64,
    ) -> Vec<SolverEpisode> {
        let mut out = Vec::new();
        for index in 0..n {
            let task = factory.task(Split::Train, index);
            let episode = run_solver_episode(factory, solver, &task).await;
            out.push(episode.expect("every demonstrator episode ends within the turn limit"));
        }
        out
    }

    /// Episodes of `factory`'s demonstrator with `knobs` (a JSON object) and `seed` on train
    /// tasks `0..n`.
    pub(crate) async fn play(
        factory: &dyn EnvFactory,
        knobs: serde_json::Value,
        seed: u64,
        n: u64,
    ) -> Vec<SolverEpisode> {
        let knobs: DemonstratorKnobs = knobs.as_object().cloned().unwrap_or_default();
        let mut solver = factory.demonstrator(&knobs, seed).expect("valid knobs");
        episodes_of(factory, solver.as_mut(), n).await
    }

    /// Success rate of `played` (train tasks `0, 1, ...`) over all of them, and over the task
    /// indices where `affected` holds.
    pub(crate) fn success_rates(
        played: &[SolverEpisode],
        affected: impl Fn(u64) -> bool,
    ) -> (f64, f64) {
        let mut hits = (0, 0, 0);
        for (index, episode) in (0..).zip(played) {
            let success = usize::from(episode.success);
            hits.0 += success;
            if affected(index) {
                hits.1 += success;
                hits.2 += 1;
            }
        }
        let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
        (share(hits.0, played.len()), share(hits.1, hits.2))
    }

    /// A habit at 0.5 sits between never and always: `factory`'s demonstrator with
    /// `half_knobs` on train tasks `0..n` (seed 2) solves between 20% and 80% of the tasks
    /// where `affected` holds, and overall strictly more than `always` (its success rate with
    /// the habit on every task) and less than `never` (without the habit).
    pub(crate) async fn assert_half_habit_between(
        factory: &dyn EnvFactory,
        half_knobs: serde_json::Value,
        n: u64,
        affected: impl Fn(u64) -> bool,
        always: f64,
        never: f64,
    ) {
        let half = play(factory, half_knobs, 2, n).await;
        let (overall, on_affected) = success_rates(&half, affected);
        assert!(
            0.2 < on_affected && on_affected < 0.8,
            "{on_affected} of the affected tasks"
        );
        assert!(
            always < overall && overall < never,
            "{always} < {overall} < {never}"
        );
    }

    /// Without knobs the demonstrator plays 20 tasks exactly like the reference solver, and
    /// with `knobs` the same seed plays the same episodes twice.
    pub(crate) async fn assert_reference_without_knobs_and_repeatable(
        factory: &dyn EnvFactory,
        knobs: serde_json::Value,
    ) {
        assert_reference_without_knobs_and_repeatable_by(factory, knobs, |e| e).await;
    }

    /// [`assert_reference_without_knobs_and_repeatable`] comparing the episodes after `same`
    /// (e.g. [`without_ports`] for envs that serve a site on a fresh port each session).
    pub(crate) async fn assert_reference_without_knobs_and_repeatable_by(
        factory: &dyn EnvFactory,
        knobs: serde_json::Value,
        same: fn(Vec<SolverEpisode>) -> Vec<SolverEpisode>,
    ) {
        let plain = same(play(factory, serde_json::json!({}), 4, 20).await);
        let mut expert = factory.solver(0);
        assert_eq!(plain, same(episodes_of(factory, expert.as_mut(), 20).await));
        assert_eq!(
            same(play(factory, knobs.clone(), 9, 20).await),
            same(play(factory, knobs, 9, 20).await)
        );
    }

    /// Fails with a clear message unless bubblewrap (`bwrap`), which the shell envs'
    /// sandbox runs in, is in `PATH`.
    #[cfg(feature = "shell-envs")]
    pub(crate) fn require_bwrap() {
        let ok = std::process::Command::new("bwrap")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "these tests need bubblewrap (`bwrap`) in PATH; install it (e.g. apt-get install bubblewrap)"
        );
    }

    /// `episodes` with every local address `127.0.0.1:N` written `127.0.0.1:PORT`.
    #[cfg(feature = "web-envs")]
    pub(crate) fn without_ports(episodes: Vec<SolverEpisode>) -> Vec<SolverEpisode> {
        let port = regex::Regex::new(r"127\.0\.0\.1:[0-9]+").expect("a valid pattern");
        let text = serde_json::to_string(&episodes).expect("episodes serialise");
        let text = port.replace_all(&text, "127.0.0.1:PORT");
        serde_json::from_str(&text).expect("episodes read back")
    }

    /// `result` is an [`Error::Config`] naming `env` (as `` `env` ``) and containing `knob`.
    pub(crate) fn assert_knob_error<T>(result: agentrl_core::Result<T>, env: &str, knob: &str) {
        match result.err() {
            Some(Error::Config(text)) => {
                assert!(
                    text.contains(&format!("`{env}`")) && text.contains(knob),
                    "{text}"
                )
            }
            Some(other) => panic!("not a config error: {other}"),
            None => panic!("accepted"),
        }
    }
}
