//! The env registry: constructors of env factories by id.
//!
//! A [`Registry`] is a table from env id to a constructor of its factory (with default
//! settings). [`Registry::builtin`] holds the envs compiled into this crate; the process-wide
//! registry behind [`lookup`] and [`env_ids`] starts as the built-in one, and [`register`] adds
//! an env defined elsewhere (so a config's `[env] id` finds it) without editing this crate.
//! [`lookup_with_options`] makes a built-in env from a config's `[env.options]` table (the
//! `dataset` env and the envs that accept user data); [`env_option_docs`] lists the options.
//!
//! ```
//! use std::sync::Arc;
//! use agentrl_env::{ArithCalc, Registry};
//!
//! let mut registry = Registry::builtin();
//! registry.register("arith-calc-seed-7", || Arc::new(ArithCalc::new(7)))?;
//! assert!(registry.ids().contains(&"arith-calc-seed-7"));
//! assert!(registry.register("maze", || Arc::new(ArithCalc::new(7))).is_err());
//! # Ok::<(), agentrl_core::Error>(())
//! ```

use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use agentrl_core::{Error, Result};

#[cfg(feature = "web-envs")]
use crate::api_booking::{API_BOOKING_ID, ApiBooking};
use crate::arith_calc::{ARITH_CALC_ID, ArithCalc};
#[cfg(feature = "shell-envs")]
use crate::code_fix::{CODE_FIX_ID, CodeFix};
use crate::dataset::{DATASET_ID, DATASET_OPTION_DOCS, Dataset, EnvOptions};
use crate::demonstrator::KnobDoc;
use crate::factory::EnvFactory;
#[cfg(feature = "search-envs")]
use crate::knowledge_search::{KNOWLEDGE_SEARCH_ID, KNOWLEDGE_SEARCH_USER_DATA, KnowledgeSearch};
use crate::math_reasoning::{MATH_REASONING_ID, MATH_REASONING_USER_DATA, MathReasoning};
use crate::maze::{MAZE_ID, Maze};
use crate::negotiation::{NEGOTIATION_ID, Negotiation};
#[cfg(feature = "shell-envs")]
use crate::os_shell::{OS_SHELL_ID, OsShell};
#[cfg(feature = "sql-envs")]
use crate::spreadsheet_ops::{SPREADSHEET_OPS_ID, SpreadsheetOps};
#[cfg(feature = "sql-envs")]
use crate::sql_analysis::{SQL_ANALYSIS_ID, SQL_ANALYSIS_USER_DATA, SqlAnalysis};
use crate::strategy_game::{STRATEGY_GAME_ID, StrategyGame};
use crate::text_adventure::{TEXT_ADVENTURE_ID, TextAdventure};
#[cfg(feature = "web-envs")]
use crate::web_shop::{WEB_SHOP_ID, WebShop};

/// Makes the factory of one env with its default settings.
pub type EnvConstructor = Arc<dyn Fn() -> Arc<dyn EnvFactory> + Send + Sync>;

/// A table of env constructors by id, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<(&'static str, EnvConstructor)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("ids", &self.ids())
            .finish()
    }
}

/// The constructor of `F`'s default factory.
fn default_of<F: EnvFactory + Default + 'static>() -> EnvConstructor {
    Arc::new(|| Arc::new(F::default()) as Arc<dyn EnvFactory>)
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// The envs compiled into this crate (see the crate's features), with default settings, in
    /// the order `env_ids` lists them.
    pub fn builtin() -> Self {
        let mut entries = vec![
            (ARITH_CALC_ID, default_of::<ArithCalc>()),
            (MATH_REASONING_ID, default_of::<MathReasoning>()),
            (MAZE_ID, default_of::<Maze>()),
            (TEXT_ADVENTURE_ID, default_of::<TextAdventure>()),
        ];
        #[cfg(feature = "sql-envs")]
        entries.extend([
            (SQL_ANALYSIS_ID, default_of::<SqlAnalysis>()),
            (SPREADSHEET_OPS_ID, default_of::<SpreadsheetOps>()),
        ]);
        #[cfg(feature = "search-envs")]
        entries.push((KNOWLEDGE_SEARCH_ID, default_of::<KnowledgeSearch>()));
        #[cfg(feature = "web-envs")]
        entries.extend([
            (API_BOOKING_ID, default_of::<ApiBooking>()),
            (WEB_SHOP_ID, default_of::<WebShop>()),
        ]);
        #[cfg(feature = "shell-envs")]
        entries.extend([
            (OS_SHELL_ID, default_of::<OsShell>()),
            (CODE_FIX_ID, default_of::<CodeFix>()),
        ]);
        entries.extend([
            (STRATEGY_GAME_ID, default_of::<StrategyGame>()),
            (NEGOTIATION_ID, default_of::<Negotiation>()),
            (DATASET_ID, default_of::<Dataset>()),
        ]);
        Registry { entries }
    }

    /// Adds env `id`, made by `constructor`; an id already registered is an [`Error::Config`]
    /// naming it.
    pub fn register(
        &mut self,
        id: &'static str,
        constructor: impl Fn() -> Arc<dyn EnvFactory> + Send + Sync + 'static,
    ) -> Result<()> {
        if self.constructor(id).is_some() {
            return Err(Error::Config(format!(
                "env id `{id}` is already registered"
            )));
        }
        self.entries.push((id, Arc::new(constructor)));
        Ok(())
    }

    /// The registered ids, in registration order.
    pub fn ids(&self) -> Vec<&'static str> {
        self.entries.iter().map(|(id, _)| *id).collect()
    }

    /// The constructor registered under `id`.
    pub fn constructor(&self, id: &str) -> Option<EnvConstructor> {
        self.entries
            .iter()
            .find(|(known, _)| *known == id)
            .map(|(_, constructor)| constructor.clone())
    }

    /// A factory of env `id`; an unknown id is an [`Error::Config`] that lists the known ids.
    pub fn lookup(&self, id: &str) -> Result<Arc<dyn EnvFactory>> {
        match self.constructor(id) {
            Some(constructor) => Ok(constructor()),
            None => Err(unknown_id(id, &self.ids())),
        }
    }
}

/// The error for an unknown env id.
fn unknown_id(id: &str, known: &[&str]) -> Error {
    Error::Config(format!(
        "unknown env id `{id}`; known env ids: {}",
        known.join(", ")
    ))
}

/// The process-wide registry, created with the built-in envs on first use.
fn global() -> &'static RwLock<Registry> {
    static GLOBAL: OnceLock<RwLock<Registry>> = OnceLock::new();
    GLOBAL.get_or_init(|| RwLock::new(Registry::builtin()))
}

/// Adds env `id` to the process-wide registry, so [`lookup`] and [`env_ids`] (and a config's
/// `[env] id`) find it; an id already registered is an [`Error::Config`] naming it.
pub fn register(
    id: &'static str,
    constructor: impl Fn() -> Arc<dyn EnvFactory> + Send + Sync + 'static,
) -> Result<()> {
    // A panic elsewhere cannot leave the table half-written (a push is all a writer does), so
    // a poisoned lock still holds a usable table.
    let mut registry = global().write().unwrap_or_else(PoisonError::into_inner);
    registry.register(id, constructor)
}

/// Ids of all envs in the process-wide registry: the built-in ones, then those added with
/// [`register`].
pub fn env_ids() -> Vec<&'static str> {
    global()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .ids()
}

/// A factory of env `id` from the process-wide registry (with its default settings); an
/// unknown id is an [`Error::Config`] that lists the known ids.
pub fn lookup(id: &str) -> Result<Arc<dyn EnvFactory>> {
    let (constructor, ids) = {
        let registry = global().read().unwrap_or_else(PoisonError::into_inner);
        (registry.constructor(id), registry.ids())
    };
    // Called with the lock released, so a constructor may itself look envs up.
    match constructor {
        Some(constructor) => Ok(constructor()),
        None => Err(unknown_id(id, &ids)),
    }
}

/// Makes a built-in env's factory from its `[env.options]` table.
type OptionsConstructor = fn(&EnvOptions) -> Result<Arc<dyn EnvFactory>>;

/// The built-in envs that take options: id, constructor and the options' docs.
fn option_envs() -> Vec<(&'static str, OptionsConstructor, Vec<KnobDoc>)> {
    let dataset: OptionsConstructor = |o| Ok(Arc::new(Dataset::from_options(o)?));
    #[cfg_attr(
        not(any(feature = "sql-envs", feature = "search-envs")),
        allow(unused_mut)
    )]
    let mut envs = vec![
        (DATASET_ID, dataset, DATASET_OPTION_DOCS.to_vec()),
        (
            MATH_REASONING_ID,
            MathReasoning::from_options as OptionsConstructor,
            MATH_REASONING_USER_DATA.option_docs(),
        ),
    ];
    #[cfg(feature = "sql-envs")]
    envs.push((
        SQL_ANALYSIS_ID,
        SqlAnalysis::from_options,
        SQL_ANALYSIS_USER_DATA.option_docs(),
    ));
    #[cfg(feature = "search-envs")]
    envs.push((
        KNOWLEDGE_SEARCH_ID,
        KnowledgeSearch::from_options,
        KNOWLEDGE_SEARCH_USER_DATA.option_docs(),
    ));
    envs
}

/// A factory of env `id` set up by `options` (a config's `[env.options]` table): with no
/// options, the same as [`lookup`]; `dataset`, `math-reasoning`, `sql-analysis` and
/// `knowledge-search` read theirs (see [`env_option_docs`]); any other env refuses options
/// with an [`Error::Config`] naming it.
pub fn lookup_with_options(id: &str, options: &EnvOptions) -> Result<Arc<dyn EnvFactory>> {
    if options.is_empty() {
        return lookup(id);
    }
    match option_envs().into_iter().find(|(known, _, _)| *known == id) {
        Some((_, construct, _)) => construct(options),
        None => Err(Error::Config(format!(
            "env `{id}` takes no options (envs with options: {})",
            option_envs()
                .iter()
                .map(|(known, _, _)| *known)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The options env `id` accepts (name, one-line doc); empty for envs without options. The
/// generator envs list their `seed` ([`SEED_OPTION`](crate::dataset::SEED_OPTION)) first.
pub fn env_option_docs(id: &str) -> Vec<KnobDoc> {
    option_envs()
        .into_iter()
        .find(|(known, _, _)| *known == id)
        .map(|(_, _, docs)| docs)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_known_and_unknown() {
        for id in env_ids() {
            assert_eq!(lookup(id).unwrap().id(), id);
        }
        let err = lookup("nope").err().unwrap();
        assert!(matches!(err, Error::Config(_)));
        assert!(err.to_string().contains(ARITH_CALC_ID), "{err}");
    }

    #[test]
    fn a_registry_adds_envs_and_refuses_duplicate_ids() {
        let mut registry = Registry::new();
        assert!(registry.ids().is_empty());
        registry
            .register("seeded", || Arc::new(ArithCalc::new(3)))
            .unwrap();
        assert_eq!(registry.ids(), ["seeded"]);
        assert_eq!(registry.lookup("seeded").unwrap().id(), ARITH_CALC_ID);
        let err = registry
            .register("seeded", || Arc::new(Maze::default()))
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)));
        assert!(err.to_string().contains("`seeded`"), "{err}");
        let err = registry.lookup("maze").err().unwrap();
        assert!(err.to_string().contains("known env ids: seeded"), "{err}");
    }

    #[test]
    fn builtin_ids_come_in_table_order() {
        let ids = Registry::builtin().ids();
        assert_eq!(ids.first(), Some(&ARITH_CALC_ID));
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len());
    }
}
