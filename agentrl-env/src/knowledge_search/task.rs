//! Questions about a corpus: one- and two-hop chains of relations, seeded generation with the
//! split rule, and reading a question back from a task.

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::KNOWLEDGE_SEARCH_ID;
use super::corpus::Corpus;
use super::world::World;
use crate::session::{draw_in_split, split_of_text};

/// A fact linking an entity to another entity or to a value (a year, a river).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// Person → town of birth.
    BornIn,
    /// Person → the company they founded.
    Founded,
    /// Company → the person who founded it.
    FounderOf,
    /// Company → year of founding.
    FoundedYear,
    /// Company → the town it is based in.
    BasedIn,
    /// Invention → its inventor.
    Inventor,
    /// Invention → the company that manufactures it.
    Maker,
    /// Town → the river it lies on.
    River,
}

/// The kind of entity a chain starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Person,
    Company,
    Town,
    Invention,
}

/// Question templates: the starting kind, the chain of relations and the wording (`{}` is the
/// starting entity).
const TEMPLATES: [(Kind, &[Relation], &str); 13] = [
    (
        Kind::Person,
        &[Relation::BornIn],
        "In which town was {} born?",
    ),
    (Kind::Company, &[Relation::FounderOf], "Who founded {}?"),
    (
        Kind::Company,
        &[Relation::FoundedYear],
        "In which year was {} founded?",
    ),
    (
        Kind::Company,
        &[Relation::BasedIn],
        "In which town is {} based?",
    ),
    (
        Kind::Invention,
        &[Relation::Inventor],
        "Who invented the {}?",
    ),
    (
        Kind::Invention,
        &[Relation::Maker],
        "Which company manufactures the {}?",
    ),
    (
        Kind::Town,
        &[Relation::River],
        "On which river does {} lie?",
    ),
    (
        Kind::Person,
        &[Relation::Founded, Relation::BasedIn],
        "In which town is the company founded by {} based?",
    ),
    (
        Kind::Invention,
        &[Relation::Inventor, Relation::BornIn],
        "In which town was the inventor of the {} born?",
    ),
    (
        Kind::Invention,
        &[Relation::Maker, Relation::BasedIn],
        "In which town is the company that manufactures the {} based?",
    ),
    (
        Kind::Person,
        &[Relation::BornIn, Relation::River],
        "On which river lies the town where {} was born?",
    ),
    (
        Kind::Invention,
        &[Relation::Maker, Relation::FounderOf],
        "Who founded the company that manufactures the {}?",
    ),
    (
        Kind::Invention,
        &[Relation::Inventor, Relation::Founded],
        "Which company was founded by the inventor of the {}?",
    ),
];

/// An entity of a world by kind and index, or a bare value (a year, a river) that has no
/// article of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entity {
    Person(usize),
    Company(usize),
    Town(usize),
    Invention(usize),
    Value(String),
}

impl Entity {
    /// Its name.
    fn name(&self, w: &World) -> String {
        match self {
            Entity::Person(i) => w.people[*i].name.clone(),
            Entity::Company(i) => w.companies[*i].name.clone(),
            Entity::Town(i) => w.towns[*i].name.clone(),
            Entity::Invention(i) => w.inventions[*i].name.clone(),
            Entity::Value(v) => v.clone(),
        }
    }

    /// The entity `relation` leads to from this one, if the fact exists.
    fn follow(&self, relation: Relation, w: &World) -> Option<Entity> {
        Some(match (self, relation) {
            (Entity::Person(p), Relation::BornIn) => Entity::Town(w.people[*p].born_in),
            (Entity::Person(p), Relation::Founded) => Entity::Company(w.company_founded_by(*p)?),
            (Entity::Company(c), Relation::FounderOf) => Entity::Person(w.companies[*c].founder),
            (Entity::Company(c), Relation::FoundedYear) => {
                Entity::Value(w.companies[*c].founded_year.to_string())
            }
            (Entity::Company(c), Relation::BasedIn) => Entity::Town(w.companies[*c].based_in),
            (Entity::Invention(i), Relation::Inventor) => Entity::Person(w.inventions[*i].inventor),
            (Entity::Invention(i), Relation::Maker) => Entity::Company(w.inventions[*i].maker),
            (Entity::Town(t), Relation::River) => Entity::Value(w.towns[*t].river.clone()),
            _ => return None,
        })
    }
}

/// One question about a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The question as asked.
    pub question: String,
    /// The entity the chain starts from.
    pub start: String,
    /// The relations to follow, in order.
    pub relations: Vec<Relation>,
    /// The expected answer (a name or a year).
    pub answer: String,
}

impl Question {
    /// Number of facts to look up.
    pub fn hops(&self) -> usize {
        self.relations.len()
    }

    /// A random question about `corpus`: a template and a starting entity, redrawn until the
    /// chain exists and, for two hops, no single article names both the start and the answer.
    fn random(corpus: &Corpus, rng: &mut SeededRng) -> Question {
        let w = &corpus.world;
        loop {
            let (kind, relations, wording) =
                TEMPLATES[rng.range(0, TEMPLATES.len() as i64 - 1) as usize];
            let mut draw = |n: usize| rng.range(0, n as i64 - 1) as usize;
            let start = match kind {
                Kind::Person => Entity::Person(draw(w.people.len())),
                Kind::Company => Entity::Company(draw(w.companies.len())),
                Kind::Town => Entity::Town(draw(w.towns.len())),
                Kind::Invention => Entity::Invention(draw(w.inventions.len())),
            };
            let end = relations
                .iter()
                .try_fold(start.clone(), |at, &r| at.follow(r, w));
            let Some(end) = end else { continue };
            let (start, answer) = (start.name(w), end.name(w));
            if relations.len() > 1 && corpus.one_article_mentions(&start, &answer) {
                continue;
            }
            return Question {
                question: wording.replace("{}", &start),
                start,
                relations: relations.to_vec(),
                answer,
            };
        }
    }

    /// Question `index` of `split` about `corpus`: candidates drawn from
    /// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`
    /// (test iff the stable hash of the question text is divisible by 5).
    pub fn generate(corpus: &Corpus, split: Split, index: u64) -> Question {
        draw_in_split(corpus.seed, split, index, |rng| {
            Some(Question::random(corpus, rng)).filter(|q| split_of_text(&q.question) == split)
        })
    }

    /// The task for this question, with id `{split}-{index}`.
    pub fn to_task(&self, split: Split, index: u64) -> Task {
        Task {
            env_id: KNOWLEDGE_SEARCH_ID.to_string(),
            id: format!("{split}-{index}"),
            split,
            data: json!({
                "question": self.question,
                "start": self.start,
                "relations": self.relations,
                "answer": self.answer,
            }),
        }
    }

    /// The question of a task made by [`Question::to_task`].
    pub fn from_task(task: &Task) -> Result<Question> {
        let bad =
            |why: String| Error::env(KNOWLEDGE_SEARCH_ID, format!("task `{}`: {why}", task.id));
        if task.env_id != KNOWLEDGE_SEARCH_ID {
            return Err(bad(format!("belongs to env `{}`", task.env_id)));
        }
        let question: Question = serde_json::from_value(task.data.clone())
            .map_err(|e| bad(format!("data is not a knowledge-search question: {e}")))?;
        if question.relations.is_empty() || question.answer.trim().is_empty() {
            return Err(bad("question has no relations or no answer".into()));
        }
        Ok(question)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_follow_the_world() {
        let corpus = Corpus::generate(5);
        let w = &corpus.world;
        for i in 0..200 {
            let q = Question::generate(&corpus, Split::Train, i);
            assert!(q.question.contains(&q.start));
            if q.relations == [Relation::Founded, Relation::BasedIn] {
                let p = w.people.iter().position(|p| p.name == q.start).unwrap();
                let c = w.company_founded_by(p).unwrap();
                assert_eq!(q.answer, w.towns[w.companies[c].based_in].name);
            }
            let task = q.to_task(Split::Train, i);
            assert_eq!(Question::from_task(&task).unwrap(), q);
        }
    }
}
