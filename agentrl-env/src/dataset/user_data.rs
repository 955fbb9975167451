//! User data for the generator envs (`math-reasoning`, `sql-analysis`, `knowledge-search`):
//! with a `path` option the env plays the user's task file through the dataset reader under
//! its own id, with defaults that fit it (its checker, its tools, its turn limit); without
//! one, the only option is the generator's `seed`.

use std::sync::Arc;

use agentrl_core::{Error, Result};
use serde_json::Value;

use super::Dataset;
use super::options::{DATASET_OPTION_DOCS, DatasetOptions, EnvOptions, with_defaults};
use crate::demonstrator::KnobDoc;
use crate::factory::EnvFactory;

/// The option of a generator env that picks its task set.
pub const SEED_OPTION: KnobDoc = ("seed", "seed of the generated task set (without `path`)");

/// How one generator env takes user data.
#[derive(Debug, Clone, Copy)]
pub struct UserDataEnv {
    /// The env id.
    pub id: &'static str,
    /// Options that must be set together with `path` (e.g. `database`), with what they hold.
    pub required: &'static [KnobDoc],
    /// Defaults of the dataset options that are not set (e.g. `checker`, `tools`).
    pub defaults: fn() -> Vec<(&'static str, Value)>,
}

impl UserDataEnv {
    /// The options this env accepts (what `env list` shows): `seed`, then the dataset's.
    pub fn option_docs(&self) -> Vec<KnobDoc> {
        std::iter::once(SEED_OPTION)
            .chain(DATASET_OPTION_DOCS.iter().copied())
            .collect()
    }

    /// The factory `options` ask for: the user's file when `path` is set, else the generator
    /// of `seed` (0 by default) made by `generated`.
    pub fn factory(
        &self,
        options: &EnvOptions,
        generated: impl FnOnce(u64) -> Arc<dyn EnvFactory>,
    ) -> Result<Arc<dyn EnvFactory>> {
        if options.contains_key("path") {
            return Ok(Arc::new(self.user_file(options)?));
        }
        let fail = |what: String| Error::Config(format!("env `{}` options: {what}", self.id));
        if let Some(name) = options.keys().find(|k| *k != SEED_OPTION.0) {
            return Err(fail(format!(
                "option `{name}` needs `path` (a task file); without it only `seed` is accepted"
            )));
        }
        let seed = match options.get(SEED_OPTION.0) {
            None => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| fail(format!("`seed` must be a non-negative integer, got {v}")))?,
        };
        Ok(generated(seed))
    }

    /// The user's task file under this env's id.
    fn user_file(&self, options: &EnvOptions) -> Result<Dataset> {
        if options.contains_key(SEED_OPTION.0) {
            return Err(Error::Config(format!(
                "env `{}` options: `seed` applies to generated tasks, not with `path`",
                self.id
            )));
        }
        for (name, what) in self.required {
            if !options.contains_key(*name) {
                return Err(Error::Config(format!(
                    "env `{}` options: with `path`, set `{name}` ({what})",
                    self.id
                )));
            }
        }
        let merged = with_defaults(options, &(self.defaults)());
        Dataset::load_as(self.id, &DatasetOptions::from_map(self.id, &merged)?)
    }
}
