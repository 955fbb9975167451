//! An in-memory BM25 full-text index (tantivy) over titled documents, with snippets.

use tantivy::collector::TopDocs;
use tantivy::query::{Query, QueryParser, QueryParserError};
use tantivy::schema::{Field, STORED, STRING, Schema, TEXT, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, doc};

/// Memory budget of the single indexing thread (tantivy needs at least 15 MB).
const WRITER_MEMORY: usize = 32_000_000;

/// Weight of a match in the title relative to one in the body.
const TITLE_BOOST: f32 = 2.0;

/// One document to index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDocument {
    /// Identifier shown in results (e.g. `doc-0042`).
    pub id: String,
    /// Title, searched with a higher weight than the body.
    pub title: String,
    /// Full text.
    pub body: String,
}

/// One ranked search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The document's id.
    pub id: String,
    /// The document's title.
    pub title: String,
    /// The passage of the body that best matches the query (its start when only the title
    /// matched).
    pub snippet: String,
    /// BM25 score (higher is better).
    pub score: f32,
}

/// Why a search or an index build failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The query is empty or only whitespace.
    #[error("the query is empty; write a few words to search for")]
    EmptyQuery,
    /// The query does not follow the query syntax.
    #[error(
        "the query `{query}` is malformed ({reason}); use plain words, and double quotes for a phrase"
    )]
    BadQuery {
        /// The query as given.
        query: String,
        /// The parser's explanation.
        reason: String,
    },
    /// The query parses but holds no word that can be searched (e.g. only punctuation).
    #[error("the query `{0}` contains no searchable words")]
    NoTerms(String),
    /// The index itself failed (not the caller's fault).
    #[error("search index failure: {0}")]
    Index(String),
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> Self {
        SearchError::Index(e.to_string())
    }
}

/// The fields of the index schema.
#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    title: Field,
    body: Field,
}

/// A read-only BM25 index held in memory; build it once and share it (e.g. in an `Arc`).
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    parser: QueryParser,
    len: usize,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.len)
            .finish()
    }
}

impl SearchIndex {
    /// Indexes `documents` in memory (blocking; call it once and share the result).
    pub fn build(documents: &[SearchDocument]) -> Result<SearchIndex, SearchError> {
        let mut builder = Schema::builder();
        let fields = Fields {
            id: builder.add_text_field("id", STRING | STORED),
            title: builder.add_text_field("title", TEXT | STORED),
            body: builder.add_text_field("body", TEXT | STORED),
        };
        let index = Index::create_in_ram(builder.build());
        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
        for d in documents {
            writer.add_document(doc!(
                fields.id => d.id.as_str(),
                fields.title => d.title.as_str(),
                fields.body => d.body.as_str(),
            ))?;
        }
        writer.commit()?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let mut parser = QueryParser::for_index(&index, vec![fields.title, fields.body]);
        parser.set_field_boost(fields.title, TITLE_BOOST);
        Ok(SearchIndex {
            index,
            reader,
            fields,
            parser,
            len: documents.len(),
        })
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Parses `query` in tantivy's query syntax (words, `"phrases"`, `+required`,
    /// `-excluded`, `title:word`); on a syntax slip such as stray punctuation its plain words
    /// are searched, while empty and word-less queries, unknown fields and other invalid queries
    /// are errors.
    fn parse(&self, query: &str) -> Result<Box<dyn Query>, SearchError> {
        if query.trim().is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        if !query.chars().any(char::is_alphanumeric) {
            return Err(SearchError::NoTerms(query.to_string()));
        }
        let bad = |e: QueryParserError| SearchError::BadQuery {
            query: query.to_string(),
            reason: e.to_string(),
        };
        let parsed = match self.parser.parse_query(query) {
            Ok(parsed) => parsed,
            // A syntax slip (`!`, an unclosed quote): search the plain words instead.
            Err(QueryParserError::SyntaxError(_)) => {
                let words: String = query
                    .chars()
                    .map(|c| if c.is_alphanumeric() { c } else { ' ' })
                    .collect();
                self.parser.parse_query(&words).map_err(bad)?
            }
            Err(e) => return Err(bad(e)),
        };
        let mut has_terms = false;
        parsed.query_terms(&mut |_, _| has_terms = true);
        if !has_terms {
            return Err(SearchError::NoTerms(query.to_string()));
        }
        Ok(parsed)
    }

    /// The best `limit` documents for `query` by BM25 score, each with a snippet of at most
    /// about `snippet_chars` characters (blocking; cheap for a corpus held in memory).
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        snippet_chars: usize,
    ) -> Result<Vec<SearchHit>, SearchError> {
        let parsed = self.parse(query)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let top = searcher.search(&parsed, &TopDocs::with_limit(limit).order_by_score())?;
        let mut snippets = SnippetGenerator::create(&searcher, &*parsed, self.fields.body)?;
        snippets.set_max_num_chars(snippet_chars);
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let stored: TantivyDocument = searcher.doc(address)?;
            let text = |field| {
                stored
                    .get_first(field)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let snippet = snippets.snippet_from_doc(&stored);
            let snippet = if snippet.is_empty() {
                leading_text(&text(self.fields.body), snippet_chars)
            } else {
                snippet.fragment().to_string()
            };
            hits.push(SearchHit {
                id: text(self.fields.id),
                title: text(self.fields.title),
                snippet,
                score,
            });
        }
        Ok(hits)
    }

    /// The tantivy index, e.g. to inspect its schema.
    pub fn index(&self) -> &Index {
        &self.index
    }
}

/// The start of `text`, at most `max_chars` characters, cut after a whole word where possible.
fn leading_text(text: &str, max_chars: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text.to_string();
    };
    let head = &text[..cut];
    match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => head[..space].to_string(),
        _ => head.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::leading_text;

    #[test]
    fn leading_text_cuts_at_words() {
        assert_eq!(leading_text("alpha beta gamma", 100), "alpha beta gamma");
        assert_eq!(leading_text("alpha beta gamma", 12), "alpha beta");
        assert_eq!(leading_text("alphabet", 3), "alp");
        assert_eq!(leading_text("ééé ééé", 5), "ééé");
    }
}
