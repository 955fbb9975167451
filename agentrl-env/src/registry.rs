//! The env registry: the table of env factories by id.

use std::sync::Arc;

use agentrl_core::{Error, Result};

use crate::api_booking::{API_BOOKING_ID, ApiBooking};
use crate::arith_calc::{ARITH_CALC_ID, ArithCalc};
use crate::code_fix::{CODE_FIX_ID, CodeFix};
use crate::factory::EnvFactory;
use crate::knowledge_search::{KNOWLEDGE_SEARCH_ID, KnowledgeSearch};
use crate::math_reasoning::{MATH_REASONING_ID, MathReasoning};
use crate::maze::{MAZE_ID, Maze};
use crate::negotiation::{NEGOTIATION_ID, Negotiation};
use crate::os_shell::{OS_SHELL_ID, OsShell};
use crate::spreadsheet_ops::{SPREADSHEET_OPS_ID, SpreadsheetOps};
use crate::sql_analysis::{SQL_ANALYSIS_ID, SqlAnalysis};
use crate::strategy_game::{STRATEGY_GAME_ID, StrategyGame};
use crate::text_adventure::{TEXT_ADVENTURE_ID, TextAdventure};
use crate::web_shop::{WEB_SHOP_ID, WebShop};

/// Ids of all registered envs.
pub fn env_ids() -> Vec<&'static str> {
    vec![
        ARITH_CALC_ID,
        MATH_REASONING_ID,
        MAZE_ID,
        TEXT_ADVENTURE_ID,
        SQL_ANALYSIS_ID,
        SPREADSHEET_OPS_ID,
        KNOWLEDGE_SEARCH_ID,
        API_BOOKING_ID,
        WEB_SHOP_ID,
        OS_SHELL_ID,
        CODE_FIX_ID,
        STRATEGY_GAME_ID,
        NEGOTIATION_ID,
    ]
}

/// The factory registered under `id` (with its default settings); an unknown id is an
/// [`Error::Config`] that lists the known ids.
pub fn lookup(id: &str) -> Result<Arc<dyn EnvFactory>> {
    match id {
        ARITH_CALC_ID => Ok(Arc::new(ArithCalc::default())),
        MATH_REASONING_ID => Ok(Arc::new(MathReasoning::default())),
        MAZE_ID => Ok(Arc::new(Maze::default())),
        TEXT_ADVENTURE_ID => Ok(Arc::new(TextAdventure::default())),
        SQL_ANALYSIS_ID => Ok(Arc::new(SqlAnalysis::default())),
        SPREADSHEET_OPS_ID => Ok(Arc::new(SpreadsheetOps::default())),
        KNOWLEDGE_SEARCH_ID => Ok(Arc::new(KnowledgeSearch::default())),
        API_BOOKING_ID => Ok(Arc::new(ApiBooking::default())),
        WEB_SHOP_ID => Ok(Arc::new(WebShop::default())),
        OS_SHELL_ID => Ok(Arc::new(OsShell::default())),
        CODE_FIX_ID => Ok(Arc::new(CodeFix::default())),
        STRATEGY_GAME_ID => Ok(Arc::new(StrategyGame::default())),
        NEGOTIATION_ID => Ok(Arc::new(Negotiation::default())),
        other => Err(Error::Config(format!(
            "unknown env id `{other}`; known env ids: {}",
            env_ids().join(", ")
        ))),
    }
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
}
