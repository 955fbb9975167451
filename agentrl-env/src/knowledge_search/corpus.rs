//! The document corpus of a [`World`] (one short article per entity, each fact stated in
//! exactly one article) and its search index, built once per seed and shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use agentrl_tools::{SearchDocument, SearchIndex};

use super::world::World;

/// A world, its articles and (once built) their search index.
#[derive(Debug)]
pub struct Corpus {
    /// The seed the world was generated from.
    pub seed: u64,
    /// The entities and facts.
    pub world: World,
    /// One article per entity.
    pub documents: Vec<SearchDocument>,
    index: OnceLock<Result<Arc<SearchIndex>, String>>,
}

impl Corpus {
    /// The corpus of `seed`, generated afresh (see [`shared_corpus`] for the shared one).
    pub fn generate(seed: u64) -> Corpus {
        let world = World::generate(seed);
        let documents = articles(&world);
        Corpus {
            seed,
            world,
            documents,
            index: OnceLock::new(),
        }
    }

    /// The search index over the articles, built on first use (blocking) and then shared; an
    /// index that could not be built is reported with the reason.
    pub fn index(&self) -> Result<Arc<SearchIndex>, String> {
        self.index
            .get_or_init(|| {
                SearchIndex::build(&self.documents)
                    .map(Arc::new)
                    .map_err(|e| {
                        format!("cannot build the search index of corpus {}: {e}", self.seed)
                    })
            })
            .clone()
    }

    /// Whether one article mentions both `a` and `b`.
    pub fn one_article_mentions(&self, a: &str, b: &str) -> bool {
        self.documents
            .iter()
            .any(|d| mentions(&d.body, a) && mentions(&d.body, b))
    }
}

/// Whether `text` contains `name` as whole words.
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// The corpus of `seed`, generated once per process and shared by every factory and session.
pub fn shared_corpus(seed: u64) -> Arc<Corpus> {
    static CORPORA: OnceLock<Mutex<HashMap<u64, Arc<Corpus>>>> = OnceLock::new();
    let mut corpora = CORPORA
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Arc::clone(
        corpora
            .entry(seed)
            .or_insert_with(|| Arc::new(Corpus::generate(seed))),
    )
}

/// One article per person, company, town and invention, with ids `doc-0000`, `doc-0001`, ...
///
/// Each linking fact appears in one article only: a person's article says where they were
/// born and what they founded, a company's where it is based, a town's which river it lies on
/// and an invention's who invented and who manufactures it.
pub fn articles(world: &World) -> Vec<SearchDocument> {
    let mut texts: Vec<(String, String)> = Vec::new();
    for (i, p) in world.people.iter().enumerate() {
        let mut body = format!(
            "{} was born in {} in {}. {} worked as a {}.",
            p.name, world.towns[p.born_in].name, p.born_year, p.name, p.occupation
        );
        if let Some(c) = world.company_founded_by(i) {
            let c = &world.companies[c];
            body.push_str(&format!(
                " {} founded {} in {}.",
                p.name, c.name, c.founded_year
            ));
        }
        texts.push((p.name.clone(), body));
    }
    for c in &world.companies {
        let body = format!(
            "{} is based in {}. {} employs {} workers.",
            c.name, world.towns[c.based_in].name, c.name, c.workers
        );
        texts.push((c.name.clone(), body));
    }
    for t in &world.towns {
        let body = format!(
            "{} lies on the river {}. {} has {} inhabitants.",
            t.name, t.river, t.name, t.inhabitants
        );
        texts.push((t.name.clone(), body));
    }
    for inv in &world.inventions {
        let body = format!(
            "The {} was invented by {} in {}. The {} is manufactured by {}.",
            inv.name,
            world.people[inv.inventor].name,
            inv.year,
            inv.name,
            world.companies[inv.maker].name
        );
        texts.push((inv.name.clone(), body));
    }
    texts
        .into_iter()
        .enumerate()
        .map(|(i, (title, body))| SearchDocument {
            id: format!("doc-{i:04}"),
            title,
            body,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_whole_names_only() {
        assert!(mentions("Orin Dask was born", "Orin Dask"));
        assert!(!mentions("Corin Dask was born", "Orin Dask"));
        assert!(!mentions("Orin Daskel was born", "Orin Dask"));
        assert!(mentions("born in Tarnfield.", "Tarnfield"));
    }

    #[test]
    fn shared_corpora_are_shared() {
        let (a, b) = (shared_corpus(11), shared_corpus(11));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&a.index().unwrap(), &b.index().unwrap()));
        assert_eq!(a.documents.len(), a.index().unwrap().len());
    }
}
