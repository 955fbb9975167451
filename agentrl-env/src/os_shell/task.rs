//! `os-shell` tasks: a seeded file tree (logs, data, notes) and one question or chore about it,
//! with the split rule and reading a task back.

use std::collections::BTreeMap;

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde_json::{Value, json};

use super::OS_SHELL_ID;
use crate::session::{draw_in_split, split_of_text};
use crate::workspace::{files_of, files_to_json};

/// What a task asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// How many `.log` files under `logs/` (recursively) contain `word`.
    CountMatching {
        /// The word to look for (e.g. `ERROR`).
        word: String,
    },
    /// Which file under `data/` is the largest (its workspace-relative path).
    LargestFile,
    /// How many lines the `.csv` files under `data/` have in total.
    CountLines,
    /// Rename every `.txt` file under `notes/` (recursively) to `.md`.
    RenameTxt,
}

/// One generated task: the files and the question, with the expected answer where there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellTask {
    /// Workspace files, relative path → content.
    pub files: BTreeMap<String, String>,
    /// What is asked.
    pub question: Question,
}

impl ShellTask {
    /// The text shown to the agent.
    pub fn prompt(&self) -> String {
        let ask = match &self.question {
            Question::CountMatching { word } => format!(
                "How many .log files under logs/ (including subfolders) contain the word {word}? \
                 Answer with the number."
            ),
            Question::LargestFile => "Which file under data/ is the largest (in bytes)? Answer \
                                      with its path relative to the workspace, e.g. data/x.csv."
                .to_string(),
            Question::CountLines => "How many lines do the .csv files under data/ have in total? \
                                     Answer with the number."
                .to_string(),
            Question::RenameTxt => "Rename every .txt file under notes/ (including subfolders) \
                                    to the same name ending in .md, leaving the content and all \
                                    other files unchanged. Reply `done` when finished."
                .to_string(),
        };
        format!(
            "You are in a Linux workspace; use the shell tool to inspect it. {ask} Give your \
             final answer as a message without tool calls."
        )
    }

    /// The expected answer text (`None` for chores checked on the workspace).
    pub fn answer(&self) -> Option<String> {
        let files = &self.files;
        match &self.question {
            Question::CountMatching { word } => Some(
                files
                    .iter()
                    .filter(|(p, c)| {
                        p.starts_with("logs/") && p.ends_with(".log") && c.contains(word.as_str())
                    })
                    .count()
                    .to_string(),
            ),
            Question::LargestFile => files
                .iter()
                .filter(|(p, _)| p.starts_with("data/"))
                .max_by_key(|(_, c)| c.len())
                .map(|(p, _)| p.clone()),
            Question::CountLines => Some(
                files
                    .iter()
                    .filter(|(p, _)| p.starts_with("data/") && p.ends_with(".csv"))
                    .map(|(_, c)| c.lines().count())
                    .sum::<usize>()
                    .to_string(),
            ),
            Question::RenameTxt => None,
        }
    }

    /// The workspace a finished chore must contain (`None` for questions).
    pub fn expected_files(&self) -> Option<BTreeMap<String, String>> {
        (self.question == Question::RenameTxt).then(|| {
            self.files
                .iter()
                .map(|(p, c)| match p.strip_suffix(".txt") {
                    Some(stem) if p.starts_with("notes/") => (format!("{stem}.md"), c.clone()),
                    _ => (p.clone(), c.clone()),
                })
                .collect()
        })
    }

    /// The task data: files, question kind (and word) and expected answer.
    fn data(&self) -> Value {
        let (kind, word) = match &self.question {
            Question::CountMatching { word } => ("count_matching", Some(word.clone())),
            Question::LargestFile => ("largest_file", None),
            Question::CountLines => ("count_lines", None),
            Question::RenameTxt => ("rename_txt", None),
        };
        json!({
            "kind": kind,
            "word": word,
            "prompt": self.prompt(),
            "answer": self.answer(),
            "files": files_to_json(&self.files),
        })
    }
}

const SERVICES: &[&str] = &[
    "api", "auth", "cache", "db", "mail", "queue", "web", "worker",
];
const WORDS: &[&str] = &[
    "alpha", "bravo", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kestrel", "lumen", "maple", "nectar", "onyx", "pepper", "quartz", "raven", "sierra", "tundra",
];
const LEVELS: &[&str] = &["INFO", "WARN", "ERROR", "DEBUG"];

/// A word from `list`.
fn pick<'a>(rng: &mut SeededRng, list: &[&'a str]) -> &'a str {
    rng.choose(list).copied().unwrap_or("x")
}

/// A log file of 3-8 lines with random levels.
fn log_content(rng: &mut SeededRng) -> String {
    (0..rng.range(3, 8))
        .map(|i| {
            let level = pick(rng, LEVELS);
            format!(
                "2024-05-{:02} {level} {} {}\n",
                i + 1,
                pick(rng, WORDS),
                rng.range(1, 999)
            )
        })
        .collect()
}

/// The seeded file tree: logs (some nested, one `.txt` distractor), csv/dat data with a
/// unique largest file, and notes with `.txt` and `.md` files of distinct stems.
fn file_tree(rng: &mut SeededRng) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for i in 0..rng.range(4, 9) {
        let dir = if rng.chance(0.3) {
            "logs/archive"
        } else {
            "logs"
        };
        let name = format!("{dir}/{}-{i}.log", pick(rng, SERVICES));
        files.insert(name, log_content(rng));
    }
    files.insert(
        "logs/README.txt".to_string(),
        "ERROR and WARN lines are kept 30 days.\n".into(),
    );
    let mut sizes = Vec::new();
    for i in 0..rng.range(3, 6) {
        let ext = if rng.chance(0.6) { "csv" } else { "dat" };
        let rows = rng.range(2, 12);
        let content: String = (0..rows)
            .map(|_| {
                format!(
                    "{},{},{}\n",
                    pick(rng, WORDS),
                    rng.range(0, 9999),
                    rng.range(0, 99)
                )
            })
            .collect();
        sizes.push(content.len());
        files.insert(format!("data/{}-{i}.{ext}", pick(rng, WORDS)), content);
    }
    // A unique largest data file: grow the largest by one row if another has its size.
    sizes.sort_unstable();
    let tied = sizes.len() > 1 && sizes[sizes.len() - 1] == sizes[sizes.len() - 2];
    let largest = files
        .iter_mut()
        .filter(|(p, _)| p.starts_with("data/"))
        .max_by_key(|(_, c)| c.len());
    if let (true, Some((_, c))) = (tied, largest) {
        c.push_str("extra,0,0\n");
    }
    for i in 0..rng.range(2, 6) {
        let dir = if rng.chance(0.3) {
            "notes/drafts"
        } else {
            "notes"
        };
        let ext = if rng.chance(0.75) { "txt" } else { "md" };
        let text = format!(
            "{} {} {}\n",
            pick(rng, WORDS),
            pick(rng, WORDS),
            rng.range(1, 99)
        );
        files.insert(format!("{dir}/{}-{i}.{ext}", pick(rng, WORDS)), text);
    }
    files
}

/// Task `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> ShellTask {
    draw_in_split(seed, split, index, |rng| {
        let files = file_tree(rng);
        let question = match rng.range(0, 3) {
            0 => Question::CountMatching {
                word: pick(rng, &["ERROR", "WARN"]).to_string(),
            },
            1 => Question::LargestFile,
            2 => Question::CountLines,
            _ => Question::RenameTxt,
        };
        let task = ShellTask { files, question };
        (split_of_text(&task.data().to_string()) == split).then_some(task)
    })
}

/// The task for `shell_task`, with id `{split}-{index}`.
pub fn to_task(shell_task: &ShellTask, split: Split, index: u64) -> Task {
    Task {
        env_id: OS_SHELL_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: shell_task.data(),
    }
}

/// The task made by [`to_task`], read back; an error when the data is not such a task.
pub fn shell_task_of(task: &Task) -> Result<ShellTask> {
    let bad = |why: &str| Error::env(OS_SHELL_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != OS_SHELL_ID {
        return Err(bad(&format!("belongs to env `{}`", task.env_id)));
    }
    let files = files_of(OS_SHELL_ID, task)?;
    let question = match task.data.get("kind").and_then(Value::as_str) {
        Some("count_matching") => Question::CountMatching {
            word: task
                .data
                .get("word")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("count_matching needs a string `word`"))?
                .to_string(),
        },
        Some("largest_file") => Question::LargestFile,
        Some("count_lines") => Question::CountLines,
        Some("rename_txt") => Question::RenameTxt,
        _ => return Err(bad("unknown or missing `kind`")),
    };
    Ok(ShellTask { files, question })
}
