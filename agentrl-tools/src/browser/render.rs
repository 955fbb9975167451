//! HTML to readable text for the text browser: block elements become lines, links become
//! `[N] text` with their targets collected, and forms with their named fields are gathered.

use reqwest::Url;
use scraper::{ElementRef, Html, Node};

use super::page::{Field, FieldKind, Form, FormMethod, Page};

/// Elements whose content is never shown.
const HIDDEN: [&str; 6] = ["script", "style", "head", "noscript", "template", "svg"];

/// Elements that start and end a line.
const BLOCKS: [&str; 24] = [
    "p", "div", "section", "article", "main", "header", "footer", "nav", "ul", "ol", "li", "table",
    "tr", "h1", "h2", "h3", "h4", "h5", "h6", "form", "br", "hr", "aside", "dl",
];

/// Walks the document, writing text and collecting links and forms.
struct Renderer<'a> {
    base: &'a Url,
    out: String,
    links: Vec<Url>,
    forms: Vec<Form>,
    form: Option<usize>,
}

/// Renders `html`, served at `url` with status line `status`, into a [`Page`].
pub fn render(html: &str, url: &Url, status: &str) -> Page {
    let document = Html::parse_document(html);
    let title = document
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .find(|e| e.value().name() == "title")
        .map(|e| collapse(&e.text().collect::<String>()))
        .unwrap_or_default();
    let mut renderer = Renderer {
        base: url,
        out: String::new(),
        links: Vec::new(),
        forms: Vec::new(),
        form: None,
    };
    renderer.element(document.root_element());
    Page {
        url: url.clone(),
        status: status.to_string(),
        title,
        text: tidy(&renderer.out),
        links: renderer.links,
        forms: renderer.forms,
    }
}

/// Runs of whitespace as one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lines trimmed, runs of spaces collapsed, at most one blank line in a row.
fn tidy(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines().map(collapse) {
        if line.is_empty() && lines.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

impl Renderer<'_> {
    /// Renders `element` and its content.
    fn element(&mut self, element: ElementRef<'_>) {
        let name = element.value().name();
        if HIDDEN.contains(&name) {
            return;
        }
        let block = BLOCKS.contains(&name);
        if block {
            self.line_break();
        }
        match name {
            "a" => self.link(element),
            "form" => self.form(element),
            "input" => self.input(element),
            "select" => self.select(element),
            "textarea" => {
                let value = element.text().collect::<String>();
                self.field(element, FieldKind::Text, value);
            }
            "button" => {
                let label = collapse(&element.text().collect::<String>());
                self.submit(label);
            }
            _ => {
                if name == "li" {
                    self.out.push_str("- ");
                } else if name.len() == 2 && name.starts_with('h') && name != "hr" {
                    self.out.push_str("## ");
                } else if name == "td" || name == "th" {
                    self.out.push_str(" | ");
                }
                self.children(element);
            }
        }
        if block {
            self.line_break();
        }
    }

    /// Ends the current line, unless the output is at the start of a line.
    fn line_break(&mut self) {
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    /// Renders the children of `element`.
    fn children(&mut self, element: ElementRef<'_>) {
        for child in element.children() {
            match child.value() {
                Node::Text(text) => self.out.push_str(&text.replace('\n', " ")),
                Node::Element(_) => {
                    if let Some(e) = ElementRef::wrap(child) {
                        self.element(e);
                    }
                }
                _ => {}
            }
        }
    }

    /// `[N] text` for a link with a usable target, the bare text otherwise.
    fn link(&mut self, element: ElementRef<'_>) {
        let text = collapse(&element.text().collect::<String>());
        let target = element
            .value()
            .attr("href")
            .and_then(|h| self.base.join(h.trim()).ok());
        match target {
            Some(url) if matches!(url.scheme(), "http" | "https") => {
                self.links.push(url);
                self.out
                    .push_str(&format!(" [{}] {text} ", self.links.len()));
            }
            _ => self.out.push_str(&format!(" {text} ")),
        }
    }

    /// Starts a form, renders its content and ends it.
    fn form(&mut self, element: ElementRef<'_>) {
        let attr = |a: &str| element.value().attr(a).map(str::trim);
        let action = match attr("action").filter(|a| !a.is_empty()) {
            Some(a) => self.base.join(a).unwrap_or_else(|_| self.base.clone()),
            None => self.base.clone(),
        };
        let method = match attr("method") {
            Some(m) if m.eq_ignore_ascii_case("post") => FormMethod::Post,
            _ => FormMethod::Get,
        };
        self.forms.push(Form {
            action,
            method,
            fields: Vec::new(),
            submit_label: None,
        });
        let outer = self.form.replace(self.forms.len() - 1);
        self.out
            .push_str(&format!("{{form {}}}\n", self.forms.len()));
        self.children(element);
        self.form = outer;
    }

    /// An `input`: a field, a radio option or a submit button.
    fn input(&mut self, element: ElementRef<'_>) {
        let kind = element
            .value()
            .attr("type")
            .unwrap_or("text")
            .to_ascii_lowercase();
        let value = element.value().attr("value").unwrap_or("").to_string();
        match kind.as_str() {
            "submit" | "button" => self.submit(if value.is_empty() {
                "Submit".into()
            } else {
                value
            }),
            "hidden" => self.field(element, FieldKind::Hidden, value),
            "radio" => self.radio(element, value),
            "checkbox" | "image" | "file" | "reset" => {}
            _ => self.field(element, FieldKind::Text, value),
        }
    }

    /// A `select` with its options (value attribute, else text); the selected one is current.
    fn select(&mut self, element: ElementRef<'_>) {
        let mut options = Vec::new();
        let mut selected = None;
        for option in element.descendants().filter_map(ElementRef::wrap) {
            if option.value().name() != "option" {
                continue;
            }
            let value = match option.value().attr("value") {
                Some(v) => v.to_string(),
                None => collapse(&option.text().collect::<String>()),
            };
            if option.value().attr("selected").is_some() {
                selected = Some(value.clone());
            }
            options.push(value);
        }
        let value = selected
            .or_else(|| options.first().cloned())
            .unwrap_or_default();
        self.field(element, FieldKind::Choice(options), value);
    }

    /// A radio button: an option of the choice field of its name.
    fn radio(&mut self, element: ElementRef<'_>, value: String) {
        let (Some(form), Some(name)) = (self.form, element.value().attr("name")) else {
            return;
        };
        let checked = element.value().attr("checked").is_some();
        self.out.push_str(&format!(" ({name}: {value}) "));
        let fields = &mut self.forms[form].fields;
        match fields.iter_mut().find(|f| f.name == name) {
            Some(Field {
                kind: FieldKind::Choice(options),
                value: current,
                ..
            }) => {
                options.push(value.clone());
                if checked {
                    *current = value;
                }
            }
            Some(_) => {}
            None => fields.push(Field {
                name: name.to_string(),
                value: if checked {
                    value.clone()
                } else {
                    String::new()
                },
                kind: FieldKind::Choice(vec![value]),
            }),
        }
    }

    /// A named field of the current form.
    fn field(&mut self, element: ElementRef<'_>, kind: FieldKind, value: String) {
        let (Some(form), Some(name)) = (self.form, element.value().attr("name")) else {
            return;
        };
        if kind != FieldKind::Hidden {
            self.out.push_str(&format!(" [{name}] "));
        }
        self.forms[form].fields.push(Field {
            name: name.to_string(),
            kind,
            value,
        });
    }

    /// The submit button of the current form.
    fn submit(&mut self, label: String) {
        self.out.push_str(&format!(" [submit: {label}] "));
        if let Some(form) = self.form {
            self.forms[form].submit_label.get_or_insert(label);
        }
    }
}
