//! The reference solver of `knowledge-search`: it follows the question's chain of relations
//! one search at a time, reading each fact out of the search results it has seen, as an agent
//! would (it never looks at the expected answer).

use agentrl_core::{Message, Role, Task, ToolCall};
use agentrl_tools::Search;
use serde_json::json;

use super::task::{Question, Relation};
use crate::factory::Solver;

/// Searches tried per hop before giving up.
const TRIES_PER_HOP: usize = 3;

/// The reference solver: one search per hop, retried with broader queries when the results
/// do not state the fact.
#[derive(Debug, Clone, Copy, Default)]
pub struct KnowledgeExpert;

impl Solver for KnowledgeExpert {
    fn act(&mut self, task: &Task, history: &[Message]) -> Message {
        match Question::from_task(task) {
            Ok(question) => {
                next_action(&question, &Progress::of(&question, history), history, None)
            }
            Err(e) => unreadable_task(&e),
        }
    }
}

/// The reply of a solver that cannot read its task.
pub(super) fn unreadable_task(error: &agentrl_core::Error) -> Message {
    Message::assistant(format!("I cannot read this task: {error}"))
}

/// How far the search results in a history have taken a question's chain of relations.
pub(super) struct Progress {
    /// Number of facts read so far.
    pub hop: usize,
    /// The entity the last fact led to (the question's start before the first).
    pub subject: String,
    /// Searches made since the last fact was read.
    pub tries: usize,
}

impl Progress {
    /// The progress on `question` after the tool results in `history`.
    pub fn of(question: &Question, history: &[Message]) -> Progress {
        let (mut hop, mut subject, mut tries) = (0, question.start.clone(), 0);
        for result in history.iter().filter(|m| m.role == Role::Tool) {
            let Some(&relation) = question.relations.get(hop) else {
                break;
            };
            match read_fact(relation, &subject, result.text()) {
                Some(value) => (hop, subject, tries) = (hop + 1, value, 0),
                None => tries += 1,
            }
        }
        Progress {
            hop,
            subject,
            tries,
        }
    }
}

/// The expert's action on `question` at `progress`: the answer once every fact is read, a
/// search for the next one, or giving up after [`TRIES_PER_HOP`] fruitless searches.
/// `first_limit`, when given, replaces the result count of each hop's first search.
pub(super) fn next_action(
    question: &Question,
    progress: &Progress,
    history: &[Message],
    first_limit: Option<usize>,
) -> Message {
    let Progress {
        hop,
        subject,
        tries,
    } = progress;
    let (hop, tries) = (*hop, *tries);
    let Some(&relation) = question.relations.get(hop) else {
        return Message::assistant(subject.as_str());
    };
    if tries >= TRIES_PER_HOP {
        return Message::assistant("I could not find the answer.");
    }
    let (query, mut limit) = query_for(relation, subject, tries);
    if let (0, Some(first)) = (tries, first_limit) {
        limit = first;
    }
    let call = ToolCall::new(
        format!("call_{}", history.len()),
        Search::NAME,
        &json!({ "query": query, "limit": limit }),
    );
    Message::assistant_tool_calls(None, vec![call])
}

/// The query (and result count) of try `attempt` for `relation` of `subject`: first the name
/// with the relation's keyword, then the name alone, then its words without the phrase quotes.
pub fn query_for(relation: Relation, subject: &str, attempt: usize) -> (String, usize) {
    let keyword = match relation {
        Relation::BornIn => "born",
        Relation::Founded | Relation::FounderOf | Relation::FoundedYear => "founded",
        Relation::BasedIn => "based",
        Relation::Inventor => "invented",
        Relation::Maker => "manufactured",
        Relation::River => "river",
    };
    match attempt {
        0 => (format!("\"{subject}\" {keyword}"), 3),
        1 => (format!("\"{subject}\" {keyword}"), 5),
        _ => (format!("\"{subject}\""), 5),
    }
}

/// The value of `relation` for `subject` as stated in `text` (search results), if stated.
pub fn read_fact(relation: Relation, subject: &str, text: &str) -> Option<String> {
    let after = |phrase: &str| name_after(text, &format!("{subject} {phrase} "));
    match relation {
        Relation::BornIn => after("was born in"),
        Relation::Founded => after("founded"),
        Relation::BasedIn => after("is based in"),
        Relation::Inventor => after("was invented by"),
        Relation::Maker => after("is manufactured by"),
        Relation::River => after("lies on the river"),
        Relation::FounderOf => name_before(text, &format!(" founded {subject} in ")),
        Relation::FoundedYear => year_after(text, &format!(" founded {subject} in ")),
    }
}

/// Positions just past each occurrence of `pattern` in `text` that starts a word.
fn ends_of<'a>(text: &'a str, pattern: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(pattern)
        .filter(move |(at, _)| {
            let own_start = pattern.starts_with(' ');
            own_start
                || !text[..*at]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric)
        })
        .map(|(at, p)| at + p.len())
}

/// Whether `word` starts with an upper-case letter.
fn capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
}

/// The run of capitalised words right after the first occurrence of `pattern` that has one.
fn name_after(text: &str, pattern: &str) -> Option<String> {
    ends_of(text, pattern).find_map(|end| {
        let mut words = Vec::new();
        for word in text[end..].split_whitespace() {
            let bare = word.trim_end_matches(['.', ',', ';']);
            if !capitalised(bare) {
                break;
            }
            words.push(bare);
            if bare.len() != word.len() {
                break;
            }
        }
        (!words.is_empty()).then(|| words.join(" "))
    })
}

/// The run of capitalised words right before the first occurrence of `pattern` that has one.
fn name_before(text: &str, pattern: &str) -> Option<String> {
    text.match_indices(pattern).find_map(|(at, _)| {
        let mut words: Vec<&str> = text[..at]
            .split_whitespace()
            .rev()
            .take_while(|w| capitalised(w) && !w.ends_with(['.', ',', ';', ']']))
            .collect();
        words.reverse();
        (!words.is_empty()).then(|| words.join(" "))
    })
}

/// The number right after the first occurrence of `pattern` that has one.
fn year_after(text: &str, pattern: &str) -> Option<String> {
    ends_of(text, pattern).find_map(|end| {
        let digits: String = text[end..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!digits.is_empty()).then_some(digits)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentrl_core::Split;

    /// The search call of a solver message: its query and limit.
    fn search_of(message: &Message) -> (String, u64) {
        let args = message.tool_calls[0].function.parse_arguments().unwrap();
        (
            args["query"].as_str().unwrap().to_string(),
            args["limit"].as_u64().unwrap(),
        )
    }

    #[test]
    fn broadens_the_query_then_gives_up() {
        let question = Question {
            question: "In which town is the company founded by Velmora Dask based?".into(),
            start: "Velmora Dask".into(),
            relations: vec![Relation::Founded, Relation::BasedIn],
            answer: "Tarnfield".into(),
        };
        let task = question.to_task(Split::Test, 0);
        let mut history = vec![Message::user("question")];
        let mut queries = Vec::new();
        for _ in 0..TRIES_PER_HOP {
            let action = KnowledgeExpert.act(&task, &history);
            queries.push(search_of(&action));
            history.push(action);
            history.push(Message::tool("c", "no documents match `x`"));
        }
        assert_eq!(
            queries,
            [
                ("\"Velmora Dask\" founded".to_string(), 3),
                ("\"Velmora Dask\" founded".to_string(), 5),
                ("\"Velmora Dask\"".to_string(), 5),
            ]
        );
        let last = KnowledgeExpert.act(&task, &history);
        assert!(last.tool_calls.is_empty() && last.text().contains("could not find"));

        // A result that states the fact moves the solver to the next hop.
        let mut history = vec![Message::user("question")];
        history.push(KnowledgeExpert.act(&task, &history));
        history.push(Message::tool("c", RESULTS));
        let next = KnowledgeExpert.act(&task, &history);
        assert_eq!(
            search_of(&next),
            ("\"Quillbrook Mills\" based".to_string(), 3)
        );
        history.push(next);
        history.push(Message::tool(
            "c",
            "1. Quillbrook Mills [d]\n   Quillbrook Mills is based in Ebbenholt.",
        ));
        assert_eq!(KnowledgeExpert.act(&task, &history).text(), "Ebbenholt");
    }

    const RESULTS: &str = "2 results for `x`:\n1. Velmora Dask [doc-0001]\n   Velmora Dask \
        was born in Tarnfield in 1841. Velmora Dask worked as a weaver. Velmora Dask founded \
        Quillbrook Mills in 1873\n2. Brindle Loom [doc-0300]\n   The Brindle Loom was invented \
        by Orin Dask in 1880. The Brindle Loom is manufactured by Quillbrook Mills";

    #[test]
    fn reads_facts_in_both_directions() {
        let read = |r, s| read_fact(r, s, RESULTS);
        assert_eq!(
            read(Relation::BornIn, "Velmora Dask").as_deref(),
            Some("Tarnfield")
        );
        assert_eq!(
            read(Relation::Founded, "Velmora Dask").as_deref(),
            Some("Quillbrook Mills")
        );
        assert_eq!(
            read(Relation::FounderOf, "Quillbrook Mills").as_deref(),
            Some("Velmora Dask")
        );
        assert_eq!(
            read(Relation::FoundedYear, "Quillbrook Mills").as_deref(),
            Some("1873")
        );
        assert_eq!(
            read(Relation::Inventor, "Brindle Loom").as_deref(),
            Some("Orin Dask")
        );
        assert_eq!(
            read(Relation::Maker, "Brindle Loom").as_deref(),
            Some("Quillbrook Mills")
        );
        assert_eq!(read(Relation::BornIn, "Orin Dask"), None);
    }
}
