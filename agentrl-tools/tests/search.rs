//! The `search` tool over a real in-memory tantivy index: BM25 ranking, snippets, result and
//! output limits, and errors for empty or malformed queries.

use std::sync::Arc;

use agentrl_core::{ToolCall, ToolContext, ToolError};
use agentrl_tools::{
    Search, SearchDocument, SearchError, SearchIndex, SearchLimits, ToolBox, ToolLimits,
};
use serde_json::{Value, json};

fn doc(id: &str, title: &str, body: &str) -> SearchDocument {
    SearchDocument {
        id: id.into(),
        title: title.into(),
        body: body.into(),
    }
}

/// A small collection where several documents share words, so ranking matters.
fn corpus() -> Vec<SearchDocument> {
    let mut docs = vec![
        doc(
            "d-mills",
            "Quillbrook Mills",
            "Quillbrook Mills is based in Tarnfield. It weaves wool and employs 340 workers.",
        ),
        doc(
            "d-velmora",
            "Velmora Dask",
            "Velmora Dask was born in Tarnfield in 1841. Velmora Dask founded Quillbrook Mills in 1873.",
        ),
        doc(
            "d-orin",
            "Orin Dask",
            "Orin Dask was born in Ebbenholt in 1850. Orin Dask worked as a ferryman.",
        ),
        doc(
            "d-tarnfield",
            "Tarnfield",
            "Tarnfield lies on the river Oskel. Tarnfield has 12400 inhabitants.",
        ),
    ];
    for i in 0..30 {
        docs.push(doc(
            &format!("d-filler-{i}"),
            &format!("Filler {i}"),
            &format!("A town record number {i} that mentions workers, wool and rivers."),
        ));
    }
    docs
}

fn index() -> Arc<SearchIndex> {
    Arc::new(SearchIndex::build(&corpus()).unwrap())
}

#[test]
fn distinctive_queries_rank_the_right_document_first() {
    let index = index();
    assert_eq!(index.len(), 34);
    for (query, expected) in [
        ("Velmora Dask", "d-velmora"),
        ("Orin Dask ferryman", "d-orin"),
        ("\"Orin Dask\"", "d-orin"),
        ("river Oskel", "d-tarnfield"),
        ("Quillbrook wool workers", "d-mills"),
        ("Dask founded", "d-velmora"),
    ] {
        let hits = index.search(query, 5, 200).unwrap();
        assert_eq!(hits[0].id, expected, "{query}: {hits:?}");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }
    // The title weighs more than the body: the company's own article comes first, the article
    // that mentions its founding second.
    let hits = index
        .search("who founded Quillbrook Mills", 3, 200)
        .unwrap();
    assert_eq!(hits[0].id, "d-mills", "{hits:?}");
    assert_eq!(hits[1].id, "d-velmora", "{hits:?}");
    assert!(
        hits[1].snippet.contains("founded Quillbrook Mills"),
        "{hits:?}"
    );
    // A phrase that exists nowhere matches nothing.
    assert!(index.search("\"Dask Orin\"", 5, 200).unwrap().is_empty());
}

#[test]
fn results_and_snippets_respect_their_limits() {
    let index = index();
    assert_eq!(index.search("workers", 3, 200).unwrap().len(), 3);
    assert_eq!(index.search("workers", 10, 200).unwrap().len(), 10);
    let short = index.search("Velmora founded", 1, 40).unwrap();
    assert!(short[0].snippet.chars().count() <= 40, "{short:?}");
    assert!(short[0].snippet.contains("Velmora") || short[0].snippet.contains("founded"));
    // Only the title matches: the snippet is the start of the body.
    let title_only = index.search("title:Filler AND title:7", 1, 30).unwrap();
    assert_eq!(title_only[0].id, "d-filler-7");
    assert_eq!(title_only[0].snippet, "A town record number 7 that");
}

#[test]
fn bad_queries_are_errors() {
    let index = index();
    assert_eq!(index.search("", 3, 100), Err(SearchError::EmptyQuery));
    assert_eq!(index.search("  \n", 3, 100), Err(SearchError::EmptyQuery));
    assert!(matches!(
        index.search("nosuchfield:wool", 3, 100),
        Err(SearchError::BadQuery { .. })
    ));
    assert!(matches!(
        index.search("-wool", 3, 100),
        Err(SearchError::BadQuery { .. })
    ));
    // Natural questions with punctuation are fine.
    for query in [
        "Where was Velmora Dask born?",
        "Velmora's birthplace, please!",
        "\"Velmora Dask",
    ] {
        let hits = index.search(query, 3, 100).unwrap();
        assert_eq!(
            hits.first().map(|h| h.id.as_str()),
            Some("d-velmora"),
            "{query}: {hits:?}"
        );
    }
    let punctuation = index.search("?? ...", 3, 100);
    assert!(
        matches!(punctuation, Err(SearchError::NoTerms(_))),
        "{punctuation:?}"
    );
}

fn call(args: Value) -> ToolCall {
    ToolCall::new("c1", Search::NAME, &args)
}

async fn dispatch(toolbox: &ToolBox, args: Value) -> (String, Option<ToolError>) {
    let outcome = toolbox.dispatch(&call(args), &ToolContext::default()).await;
    (outcome.message.text().to_string(), outcome.error)
}

#[tokio::test]
async fn the_tool_renders_ranked_results_within_its_limits() {
    let limits = SearchLimits {
        default_results: 2,
        max_results: 5,
        snippet_chars: 200,
        max_output_chars: 2000,
    };
    let toolbox = ToolBox::new(ToolLimits::default())
        .with(Search::new(index(), limits))
        .unwrap();
    let (text, error) = dispatch(&toolbox, json!({"query": "Velmora Dask"})).await;
    assert!(error.is_none(), "{text}");
    assert!(text.starts_with("2 results for `Velmora Dask`:\n1. Velmora Dask [d-velmora]\n   Velmora Dask was born in Tarnfield"), "{text}");
    assert!(text.contains("\n2. "), "{text}");

    let (text, _) = dispatch(&toolbox, json!({"query": "workers", "limit": 5})).await;
    assert!(
        text.starts_with("5 results") && text.contains("\n5. "),
        "{text}"
    );

    let (text, _) = dispatch(&toolbox, json!({"query": "zyzzyva"})).await;
    assert_eq!(text, "no documents match `zyzzyva`");

    let tight = SearchLimits {
        max_output_chars: 160,
        ..limits
    };
    let small = ToolBox::new(ToolLimits::default())
        .with(Search::new(index(), tight))
        .unwrap();
    let (text, error) = dispatch(&small, json!({"query": "workers", "limit": 5})).await;
    assert!(error.is_none());
    assert!(text.chars().count() <= 160, "{text}");
    assert!(text.contains("more results not shown"), "{text}");
}

#[tokio::test]
async fn malformed_calls_are_invalid_actions() {
    let toolbox = ToolBox::new(ToolLimits::default())
        .with(Search::new(index(), SearchLimits::default()))
        .unwrap();
    for args in [
        json!({"query": ""}),
        json!({"query": "nosuchfield:wool"}),
        json!({"query": "?!"}),
        json!({"query": "wool", "limit": 0}),
        json!({"query": "wool", "limit": 11}),
        json!({"query": 5}),
        json!({}),
        json!({"query": "x".repeat(301)}),
    ] {
        let outcome = toolbox
            .dispatch(&call(args.clone()), &ToolContext::default())
            .await;
        assert!(outcome.is_invalid_action(), "{args}: {outcome:?}");
        assert!(
            outcome.message.text().contains("error"),
            "{args}: {outcome:?}"
        );
    }
    let (text, _) = dispatch(&toolbox, json!({"query": "nosuchfield:wool"})).await;
    assert!(
        text.contains("malformed") && text.contains("nosuchfield"),
        "{text}"
    );
}
