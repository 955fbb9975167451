//! [`EnvMix`]: several envs as one factory, for multi-task runs. Task `index` of a split goes to
//! one of the envs, drawn by weight from a hash of the split and index (so it never changes),
//! and is that env's task `index`; sessions, the solver and the demonstrator follow the task's
//! `env_id`.

use std::collections::HashMap;
use std::sync::Arc;

use agentrl_core::{Env, Error, Message, Observation, Result, SeededRng, Split, Step, Task};
use async_trait::async_trait;

use crate::demonstrator::{DemonstratorKnobs, KnobDoc};
use crate::factory::{EnvFactory, Solver};

/// A weighted mixture of env factories with distinct ids.
#[derive(Clone)]
pub struct EnvMix {
    id: String,
    parts: Vec<(Arc<dyn EnvFactory>, f64)>,
    /// Cumulative weights, normalised to end at 1.
    cumulative: Vec<f64>,
    /// The demonstrator knobs of all the envs, each name once.
    knobs: Vec<KnobDoc>,
}

impl std::fmt::Debug for EnvMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvMix").field("id", &self.id).finish()
    }
}

impl EnvMix {
    /// The mixture of `parts` (factory, weight); weights must be finite and positive and ids
    /// distinct.
    pub fn new(parts: Vec<(Arc<dyn EnvFactory>, f64)>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::Config(
                "an env mixture needs at least one env".into(),
            ));
        }
        let mut ids: Vec<&str> = Vec::new();
        for (factory, weight) in &parts {
            if !(weight.is_finite() && *weight > 0.0) {
                return Err(Error::Config(format!(
                    "env `{}` has weight {weight}; weights must be finite and positive",
                    factory.id()
                )));
            }
            if ids.contains(&factory.id()) {
                return Err(Error::Config(format!(
                    "env `{}` appears twice in the mixture",
                    factory.id()
                )));
            }
            ids.push(factory.id());
        }
        let total: f64 = parts.iter().map(|(_, w)| w).sum();
        let mut acc = 0.0;
        let cumulative = parts
            .iter()
            .map(|(_, w)| {
                acc += w / total;
                acc
            })
            .collect();
        let mut knobs: Vec<KnobDoc> = Vec::new();
        for knob in parts.iter().flat_map(|(f, _)| f.demonstrator_knobs()) {
            if !knobs.iter().any(|(name, _)| *name == knob.0) {
                knobs.push(*knob);
            }
        }
        Ok(EnvMix {
            id: format!("mix({})", ids.join("+")),
            parts,
            cumulative,
            knobs,
        })
    }

    /// The envs and their weights.
    pub fn parts(&self) -> &[(Arc<dyn EnvFactory>, f64)] {
        &self.parts
    }

    /// The env that task `index` of `split` belongs to.
    fn part_of(&self, split: Split, index: u64) -> &Arc<dyn EnvFactory> {
        let salt = match split {
            Split::Train => 0x7472_6169_6e00,
            Split::Test => 0x7465_7374_0000,
        };
        let u = SeededRng::from_parts(&[salt, index]).next_f64();
        let k = self.cumulative.iter().position(|&c| u < c);
        &self.parts[k.unwrap_or(self.parts.len() - 1)].0
    }

    /// Factories by env id.
    fn by_id(&self) -> HashMap<String, Arc<dyn EnvFactory>> {
        self.parts
            .iter()
            .map(|(f, _)| (f.id().to_string(), f.clone()))
            .collect()
    }
}

#[async_trait]
impl EnvFactory for EnvMix {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        "a weighted mixture of envs"
    }

    fn task(&self, split: Split, index: u64) -> Task {
        self.part_of(split, index).task(split, index)
    }

    fn make(&self) -> Box<dyn Env> {
        Box::new(MixSession {
            id: self.id.clone(),
            factories: self.by_id(),
            current: None,
        })
    }

    fn max_turns(&self) -> usize {
        self.parts
            .iter()
            .map(|(f, _)| f.max_turns())
            .max()
            .unwrap_or(1)
    }

    fn has_solver(&self) -> bool {
        self.parts.iter().all(|(f, _)| f.has_solver())
    }

    /// Every env's check, in order; the first failure.
    async fn preflight(&self) -> Result<()> {
        for (factory, _) in &self.parts {
            factory.preflight().await?;
        }
        Ok(())
    }

    fn solver(&self, seed: u64) -> Box<dyn Solver> {
        Box::new(MixSolver {
            seed,
            factories: self.by_id(),
            solvers: HashMap::new(),
        })
    }

    /// Every knob of every env in the mixture (each name once).
    fn demonstrator_knobs(&self) -> &[KnobDoc] {
        &self.knobs
    }

    /// Each env's own demonstrator for that env's tasks, all made now with `seed`.
    ///
    /// A knob at the top of `knobs` goes to every env that declares it
    /// ([`EnvFactory::demonstrator_knobs`]), so one table can tune several envs; a key that is
    /// an env id of the mixture holds a table of that env's own knobs (TOML:
    /// `[sft.demonstrator.maze]`), which win over shared ones and are checked by that env. A
    /// top-level knob that no env declares is an error naming it and the envs.
    fn demonstrator(&self, knobs: &DemonstratorKnobs, seed: u64) -> Result<Box<dyn Solver>> {
        let is_env = |k: &str| self.parts.iter().any(|(f, _)| f.id() == k);
        if let Some(unknown) = knobs
            .keys()
            .find(|k| !is_env(k) && !self.knobs.iter().any(|(n, _)| n == *k))
        {
            let envs: Vec<&str> = self.parts.iter().map(|(f, _)| f.id()).collect();
            return Err(Error::Config(format!(
                "no env of the mixture ({}) has a demonstrator knob `{unknown}`",
                envs.join(", ")
            )));
        }
        let mut solvers = HashMap::new();
        for (factory, _) in &self.parts {
            let declared = factory.demonstrator_knobs();
            let mut own: DemonstratorKnobs = knobs
                .iter()
                .filter(|(k, _)| declared.iter().any(|(n, _)| n == k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match knobs.get(factory.id()) {
                Some(serde_json::Value::Object(table)) => {
                    own.extend(table.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                Some(other) => {
                    return Err(Error::Config(format!(
                        "demonstrator knobs of env `{}` must be a table of knobs, got {other}",
                        factory.id()
                    )));
                }
                None => {}
            }
            solvers.insert(factory.id().to_string(), factory.demonstrator(&own, seed)?);
        }
        Ok(Box::new(MixSolver {
            seed,
            factories: self.by_id(),
            solvers,
        }))
    }
}

/// A session of the mixture: a session of the task's env, made at each reset.
struct MixSession {
    id: String,
    factories: HashMap<String, Arc<dyn EnvFactory>>,
    current: Option<Box<dyn Env>>,
}

#[async_trait]
impl Env for MixSession {
    fn id(&self) -> &str {
        self.current.as_ref().map_or(&self.id, |env| env.id())
    }

    async fn reset(&mut self, task: &Task) -> Result<Observation> {
        let Some(factory) = self.factories.get(&task.env_id) else {
            let mut known: Vec<&str> = self.factories.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(Error::env(
                &self.id,
                format!(
                    "task `{}` is for env `{}`, which is not in the mixture ({})",
                    task.id,
                    task.env_id,
                    known.join(", ")
                ),
            ));
        };
        let env = self.current.insert(factory.make());
        env.reset(task).await
    }

    async fn step(&mut self, action: &Message) -> Result<Step> {
        match self.current.as_mut() {
            Some(env) => env.step(action).await,
            None => Err(Error::env(&self.id, "step called before reset")),
        }
    }
}

/// The mixture's solver: each env's own solver (made on first use when not given at the start).
struct MixSolver {
    seed: u64,
    factories: HashMap<String, Arc<dyn EnvFactory>>,
    solvers: HashMap<String, Box<dyn Solver>>,
}

impl Solver for MixSolver {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        let Some(factory) = self.factories.get(&task.env_id) else {
            return Message::assistant(format!("I have no solver for env `{}`", task.env_id));
        };
        let seed = self.seed;
        self.solvers
            .entry(task.env_id.clone())
            .or_insert_with(|| factory.solver(seed))
            .act(task, history)
    }
}
