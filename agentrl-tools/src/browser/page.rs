//! The page model of the text browser: readable text, numbered links and forms whose fields
//! the agent fills by name.

use reqwest::Url;

/// How a form is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormMethod {
    /// Fields in the query string.
    Get,
    /// Fields URL-encoded in the body.
    Post,
}

/// What kind of value a field takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldKind {
    /// Free text (`input` of a text-like type, `textarea`).
    Text,
    /// Sent as is, not shown (`input type=hidden`).
    Hidden,
    /// One of fixed options (`select`, a group of radio buttons).
    Choice(Vec<String>),
}

/// One named form field and its current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The `name` the value is sent under.
    pub name: String,
    /// The kind of value.
    pub kind: FieldKind,
    /// The current value.
    pub value: String,
}

/// A form on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// Where the form is sent.
    pub action: Url,
    /// How it is sent.
    pub method: FormMethod,
    /// Its named fields, in page order.
    pub fields: Vec<Field>,
    /// The label of its submit button, if it has one.
    pub submit_label: Option<String>,
}

impl Form {
    /// Sets field `name` to `value`; an error names the known fields or allowed options.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let names: Vec<String> = self.visible_names();
        let Some(field) = self
            .fields
            .iter_mut()
            .find(|f| f.name == name && f.kind != FieldKind::Hidden)
        else {
            return Err(format!(
                "the form has no field `{name}`; its fields: {}",
                names.join(", ")
            ));
        };
        if let FieldKind::Choice(options) = &field.kind
            && !options.iter().any(|o| o == value)
        {
            return Err(format!(
                "{value:?} is not an option of `{name}`; options: {}",
                options.join(", ")
            ));
        }
        field.value = value.to_string();
        Ok(())
    }

    /// Names of the fields the agent can fill.
    pub fn visible_names(&self) -> Vec<String> {
        let visible = self.fields.iter().filter(|f| f.kind != FieldKind::Hidden);
        visible.map(|f| f.name.clone()).collect()
    }

    /// The fields as `application/x-www-form-urlencoded` text.
    pub fn encoded(&self) -> String {
        let Ok(mut scratch) = Url::parse("http://form.invalid/") else {
            return String::new();
        };
        {
            let mut pairs = scratch.query_pairs_mut();
            for field in &self.fields {
                pairs.append_pair(&field.name, &field.value);
            }
        }
        scratch.query().unwrap_or("").to_string()
    }

    /// One line per visible field: `name = "value"` with the options of a choice.
    pub fn describe(&self, number: usize) -> String {
        let method = match self.method {
            FormMethod::Get => "GET",
            FormMethod::Post => "POST",
        };
        let mut text = format!("Form {number} ({method} {}):", self.action.path());
        for field in self.fields.iter().filter(|f| f.kind != FieldKind::Hidden) {
            text.push_str(&format!("\n  {} = {:?}", field.name, field.value));
            if let FieldKind::Choice(options) = &field.kind {
                text.push_str(&format!(" (options: {})", options.join(" | ")));
            }
        }
        if let Some(label) = &self.submit_label {
            text.push_str(&format!("\n  [submit: {label}]"));
        }
        text
    }
}

/// A page rendered for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The page's URL.
    pub url: Url,
    /// The status line it came with (e.g. `HTTP 200 OK`).
    pub status: String,
    /// The `<title>`, if any.
    pub title: String,
    /// Readable text with links as `[N] text` and forms as `{form N}` markers.
    pub text: String,
    /// Link targets; link `N` is `links[N - 1]`.
    pub links: Vec<Url>,
    /// Forms; form `N` is `forms[N - 1]`.
    pub forms: Vec<Form>,
}

impl Page {
    /// The whole page as the agent sees it.
    pub fn show(&self) -> String {
        let mut text = format!("URL: {}\n{}", self.url, self.status);
        if !self.title.is_empty() {
            text.push_str(&format!("\nTitle: {}", self.title));
        }
        text.push_str("\n\n");
        text.push_str(&self.text);
        for (i, form) in self.forms.iter().enumerate() {
            text.push_str("\n\n");
            text.push_str(&form.describe(i + 1));
        }
        text
    }
}
