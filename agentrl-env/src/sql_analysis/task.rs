//! `sql-analysis` tasks: seeded generation of a shop and a question with the split rule, and
//! reading them back from a [`Task`].

use agentrl_core::{Error, Result, Split, Task};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::SQL_ANALYSIS_ID;
use super::data::Shop;
use super::question::{Question, Truth};
use crate::session::{draw_in_split, split_of_text};

/// One task: the database rows, the question and its ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlTask {
    /// The rows of the task's database.
    pub shop: Shop,
    /// What is asked.
    pub question: Question,
    /// The answer, computed from the rows.
    pub truth: Truth,
}

impl SqlTask {
    /// The split of a shop and question: test iff the stable hash of their JSON is divisible
    /// by 5.
    pub fn split(&self) -> Split {
        let text = json!({"shop": self.shop, "question": self.question}).to_string();
        split_of_text(&text)
    }

    /// Task `index` of `split` for generator `seed`: candidates drawn from
    /// `SeededRng::from_parts(&[seed, split, index, attempt])` until one has a unique answer
    /// and falls in `split`.
    pub fn generate(seed: u64, split: Split, index: u64) -> Self {
        draw_in_split(seed, split, index, |rng| {
            let shop = Shop::random(rng);
            let question = Question::random(rng, &shop)?;
            let truth = question.truth(&shop)?;
            let task = SqlTask {
                shop,
                question,
                truth,
            };
            (task.split() == split).then_some(task)
        })
    }

    /// The task with id `{split}-{index}`; its data holds the rows, the question (with its
    /// text) and the truth.
    pub fn to_task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: SQL_ANALYSIS_ID.to_string(),
            id: format!("{split}-{index}"),
            split,
            data: json!({
                "shop": self.shop,
                "question": self.question,
                "text": self.question.text(),
                "truth": self.truth,
            }),
        }
    }

    /// The task behind a [`Task`] made by [`SqlTask::to_task`].
    pub fn from_task(task: &Task) -> Result<Self> {
        let bad = |why: String| Error::env(SQL_ANALYSIS_ID, format!("task `{}`: {why}", task.id));
        if task.env_id != SQL_ANALYSIS_ID {
            return Err(bad(format!("belongs to env `{}`", task.env_id)));
        }
        let field = |key: &str| {
            task.data
                .get(key)
                .cloned()
                .ok_or_else(|| bad(format!("data has no `{key}`")))
        };
        let parse = |key: &str, e: serde_json::Error| bad(format!("bad `{key}`: {e}"));
        Ok(SqlTask {
            shop: serde_json::from_value(field("shop")?).map_err(|e| parse("shop", e))?,
            question: serde_json::from_value(field("question")?)
                .map_err(|e| parse("question", e))?,
            truth: serde_json::from_value(field("truth")?).map_err(|e| parse("truth", e))?,
        })
    }
}
