//! `code-fix` tasks: a seeded Python module of 2-4 catalogue functions with 1-2 planted bugs
//! and its `unittest` file, with the split rule and reading a task back.

use std::collections::BTreeMap;

use agentrl_core::{Error, Result, SeededRng, Split, Task};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::CODE_FIX_ID;
use super::catalog::{Case, TEMPLATES, Template};
use crate::session::{draw_in_split, split_of_text};
use crate::workspace::{files_of, files_to_json};

/// One planted bug: the function, its buggy line and the correct line (whole lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bug {
    /// The function the bug is in.
    pub function: String,
    /// The line as planted in the module.
    pub buggy: String,
    /// The line as it should be.
    pub fixed: String,
}

/// One generated project.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// Module name (the file is `{module}.py`, the tests `test_{module}.py`).
    pub module: String,
    /// Workspace files: the buggy module and its tests.
    pub files: BTreeMap<String, String>,
    /// Number of test methods.
    pub tests: usize,
    /// The planted bugs.
    pub bugs: Vec<Bug>,
}

impl Project {
    /// The module's file name.
    pub fn module_file(&self) -> String {
        format!("{}.py", self.module)
    }

    /// The test file's name.
    pub fn test_file(&self) -> String {
        format!("test_{}.py", self.module)
    }

    /// The text shown to the agent.
    pub fn prompt(&self) -> String {
        format!(
            "The Python module {} in your workspace has bugs: some tests in {} fail. Fix the \
             module (not the tests) with read_file and write_file; run the tests with the shell \
             tool (`python3 -m unittest`). When you are done, reply without tool calls. Your \
             score is the share of tests that pass at the end.",
            self.module_file(),
            self.test_file()
        )
    }

    /// The task data.
    fn data(&self) -> Value {
        json!({
            "module": self.module,
            "tests": self.tests,
            "bugs": self.bugs,
            "files": files_to_json(&self.files),
        })
    }
}

const MODULES: &[&str] = &["toolkit", "helpers", "mathlib", "textutils", "numtools"];

/// CamelCase of a snake_case name.
fn camel(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or(String::new(), |c| {
                c.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The test class of one function.
fn test_class(template: &Template, cases: &[Case]) -> String {
    let mut text = format!(
        "\n\nclass Test{}(unittest.TestCase):\n",
        camel(template.name)
    );
    for (i, c) in cases.iter().enumerate() {
        text.push_str(&format!(
            "    def test_{name}_{n}(self):\n        self.assertEqual({name}({args}), {expected})\n",
            name = template.name,
            n = i + 1,
            args = c.args,
            expected = c.expected,
        ));
        if i + 1 < cases.len() {
            text.push('\n');
        }
    }
    text
}

/// One candidate project drawn from `rng`.
fn draw(rng: &mut SeededRng) -> Project {
    let module = rng
        .choose(MODULES)
        .copied()
        .unwrap_or("toolkit")
        .to_string();
    let mut order: Vec<usize> = (0..TEMPLATES.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.range(0, i as i64) as usize);
    }
    let count = rng.range(2, 4) as usize;
    let chosen: Vec<&Template> = order[..count].iter().map(|&i| &TEMPLATES[i]).collect();
    let bugged = rng.range(1, 2.min(count as i64)) as usize;
    let mut functions = Vec::new();
    let mut bugs = Vec::new();
    for (k, template) in chosen.iter().enumerate() {
        let mut lines: Vec<String> = template.lines.iter().map(|l| l.to_string()).collect();
        if k < bugged
            && let Some(&(good, bad)) = rng.choose(template.bugs)
        {
            for line in lines.iter_mut().filter(|l| *l == good) {
                *line = bad.to_string();
            }
            bugs.push(Bug {
                function: template.name.to_string(),
                buggy: bad.to_string(),
                fixed: good.to_string(),
            });
        }
        functions.push(lines.join("\n"));
    }
    let names: Vec<&str> = chosen.iter().map(|t| t.name).collect();
    let mut tests = format!(
        "import unittest\n\nfrom {module} import {}\n",
        names.join(", ")
    );
    let mut count_tests = 0;
    for template in &chosen {
        let cases = (template.cases)(rng);
        count_tests += cases.len();
        tests.push_str(&test_class(template, &cases));
    }
    tests.push_str("\n\nif __name__ == \"__main__\":\n    unittest.main()\n");
    let source = format!(
        "\"\"\"Small helpers.\"\"\"\n\n\n{}\n",
        functions.join("\n\n\n")
    );
    let files = BTreeMap::from([
        (format!("{module}.py"), source),
        (format!("test_{module}.py"), tests),
    ]);
    Project {
        module,
        files,
        tests: count_tests,
        bugs,
    }
}

/// Project `index` of `split` for generator `seed`: candidates drawn from
/// `SeededRng::from_parts(&[seed, split, index, attempt])` until one falls in `split`.
pub fn generate(seed: u64, split: Split, index: u64) -> Project {
    draw_in_split(seed, split, index, |rng| {
        Some(draw(rng)).filter(|project| split_of_text(&project.data().to_string()) == split)
    })
}

/// The task for `project`, with id `{split}-{index}`.
pub fn to_task(project: &Project, split: Split, index: u64) -> Task {
    Task {
        env_id: CODE_FIX_ID.to_string(),
        id: format!("{split}-{index}"),
        split,
        data: project.data(),
    }
}

/// The project of a task made by [`to_task`]; an error when the data is not such a task.
pub fn project_of(task: &Task) -> Result<Project> {
    let bad = |why: &str| Error::env(CODE_FIX_ID, format!("task `{}`: {why}", task.id));
    if task.env_id != CODE_FIX_ID {
        return Err(bad(&format!("belongs to env `{}`", task.env_id)));
    }
    let module = task.data.get("module").and_then(Value::as_str);
    let module = module
        .filter(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| bad("`module` must be a Python identifier"))?
        .to_string();
    let tests = task.data.get("tests").and_then(Value::as_u64);
    let tests = tests
        .filter(|&n| n > 0)
        .ok_or_else(|| bad("`tests` must be a positive count"))?;
    let bugs: Vec<Bug> = task
        .data
        .get("bugs")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| bad(&format!("bad `bugs`: {e}")))?
        .unwrap_or_default();
    let files = files_of(CODE_FIX_ID, task)?;
    let project = Project {
        module,
        files,
        tests: usize::try_from(tests).map_err(|_| bad("`tests` is too large"))?,
        bugs,
    };
    if !project.files.contains_key(&project.test_file()) {
        return Err(bad("the files lack the test file"));
    }
    Ok(project)
}
