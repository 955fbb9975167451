//! A user's document folder as a search index: every `.txt` and `.md` file under it (sorted by
//! path) is one document, its id the relative path without extension, its title the first
//! non-empty line (Markdown `#` marks dropped), its body the whole text.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use agentrl_tools::{SearchDocument, SearchIndex};

/// Extensions of the files read as documents.
const DOCUMENT_EXTENSIONS: &[&str] = &["txt", "md"];

/// The search index of the documents under `folder`; a folder without documents, or one that
/// cannot be read, is an error naming it.
pub fn index_corpus(folder: &Path) -> Result<SearchIndex> {
    let mut files = Vec::new();
    collect_documents(folder, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(Error::Config(format!(
            "corpus {}: no .txt or .md documents",
            folder.display()
        )));
    }
    let documents = files
        .iter()
        .map(|file| read_document(folder, file))
        .collect::<Result<Vec<_>>>()?;
    SearchIndex::build(&documents)
        .map_err(|e| Error::Config(format!("corpus {}: {e}", folder.display())))
}

/// Adds the document files under `dir` (recursively) to `files`.
fn collect_documents(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let io = |source| Error::Io {
        action: "reading corpus folder",
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            collect_documents(&path, files)?;
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| DOCUMENT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            files.push(path);
        }
    }
    Ok(())
}

/// The document in `file` (under `root`).
fn read_document(root: &Path, file: &Path) -> Result<SearchDocument> {
    let body = std::fs::read_to_string(file).map_err(|source| Error::Io {
        action: "reading corpus document",
        path: file.to_path_buf(),
        source,
    })?;
    let relative = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let id = relative.to_string_lossy().replace('\\', "/");
    let title = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or(&id)
        .to_string();
    Ok(SearchDocument { id, title, body })
}
