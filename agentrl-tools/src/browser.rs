//! The `browser` tool: a text browser over real HTTP for one session. It opens allowed URLs,
//! shows pages as text with numbered links and forms, follows links, fills and submits forms
//! and goes back through its history.

mod page;
mod render;

use std::sync::Arc;

use agentrl_core::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
use reqwest::{Client, Url};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

pub use page::{Field, FieldKind, Form, FormMethod, Page};
pub use render::render;

use crate::arguments::parse_args;
use crate::web::{UrlAllowlist, WebLimits, fetch, web_client};

/// Redirects followed per request at most.
const MAX_REDIRECTS: usize = 5;

/// Pages kept for `back` at most.
const MAX_HISTORY: usize = 50;

/// The browsing state of one session.
#[derive(Debug, Default)]
struct BrowserState {
    /// The page on screen.
    current: Option<Page>,
    /// Earlier pages, the most recent last.
    history: Vec<Page>,
}

/// The `browser` tool; one instance holds one session's page and history, and its clones
/// share them (so an env can keep a handle to the browser it put in a tool box).
#[derive(Debug, Clone)]
pub struct Browser {
    allow: UrlAllowlist,
    limits: WebLimits,
    client: Result<Client, String>,
    state: Arc<Mutex<BrowserState>>,
}

/// The arguments of the `browser` tool: the action and what it needs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrowserArgs {
    /// `open`, `click`, `fill`, `submit` or `back`.
    action: String,
    /// For `open`: an absolute URL.
    url: Option<String>,
    /// For `click`: the 1-based link number.
    link: Option<u64>,
    /// For `fill` and `submit`: the 1-based form number (1 when left out).
    form: Option<u64>,
    /// For `fill` and `submit`: values by field name.
    fields: Option<Map<String, Value>>,
}

/// A request the browser makes: a GET of a URL or a form submission.
enum Request {
    /// Fetch a URL.
    Get(Url),
    /// Send a filled form.
    Submit(Form),
}

impl Browser {
    /// Name the model calls the tool by.
    pub const NAME: &'static str = "browser";

    /// A browser with an empty history that may visit URLs under `allow`, within `limits`.
    pub fn new(allow: UrlAllowlist, limits: WebLimits) -> Self {
        let client = web_client(&allow);
        Browser {
            allow,
            limits,
            client,
            state: Arc::new(Mutex::new(BrowserState::default())),
        }
    }

    /// Forgets the current page and the history (for a new episode).
    pub async fn clear(&self) {
        *self.state.lock().await = BrowserState::default();
    }

    /// The URL of the page on screen, if any.
    pub async fn current_url(&self) -> Option<Url> {
        self.state
            .lock()
            .await
            .current
            .as_ref()
            .map(|p| p.url.clone())
    }

    /// Loads `request`, following allowed redirects, and renders the answer.
    async fn load(&self, request: Request) -> Result<Page, ToolError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let (mut url, mut builder) = match request {
            Request::Get(url) => (url.clone(), client.get(url)),
            Request::Submit(form) => {
                let url = self.allow.check_url(&form.action)?;
                match form.method {
                    FormMethod::Get => {
                        let mut target = url.clone();
                        target.set_query(Some(&form.encoded()));
                        (target.clone(), client.get(target))
                    }
                    FormMethod::Post => (
                        url.clone(),
                        client
                            .post(url)
                            .header(
                                reqwest::header::CONTENT_TYPE,
                                "application/x-www-form-urlencoded",
                            )
                            .body(form.encoded()),
                    ),
                }
            }
        };
        for _ in 0..=MAX_REDIRECTS {
            let fetched = fetch(builder, &url, self.limits).await?;
            match (fetched.status, &fetched.location) {
                (300..=399, Some(location)) => {
                    url = self.allow.resolve(&fetched.url, location).map_err(|e| {
                        ToolError::Failed(format!("{url} redirected to a refused URL: {e}"))
                    })?;
                    builder = client.get(url.clone());
                }
                _ => {
                    let mut page = render(&fetched.text(), &fetched.url, &fetched.status_line());
                    if fetched.truncated {
                        page.text.push_str(&format!(
                            "\n…[page truncated: only the first {} bytes were read]",
                            self.limits.max_body_bytes
                        ));
                    }
                    return Ok(page);
                }
            }
        }
        Err(ToolError::Failed(format!(
            "more than {MAX_REDIRECTS} redirects from {url}"
        )))
    }

    /// Shows `page` and makes it current, pushing the old page onto the history.
    fn visit(state: &mut BrowserState, page: Page) -> String {
        let shown = page.show();
        if let Some(old) = state.current.replace(page) {
            state.history.push(old);
            if state.history.len() > MAX_HISTORY {
                state.history.remove(0);
            }
        }
        shown
    }
}

/// The page on screen, or an error saying to open one.
fn current(state: &mut BrowserState) -> Result<&mut Page, ToolError> {
    state.current.as_mut().ok_or_else(|| {
        ToolError::InvalidArguments("no page is open yet; use action `open` with a url".into())
    })
}

/// The 0-based index of the 1-based number `given` in argument `key` (default `default`),
/// checked against `count` items.
fn number(
    given: Option<u64>,
    key: &str,
    default: Option<u64>,
    count: usize,
    what: &str,
) -> Result<usize, ToolError> {
    let n = given
        .or(default)
        .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` is required")))?;
    if n == 0 || n as usize > count {
        return Err(ToolError::InvalidArguments(format!(
            "there is no {what} {n} on this page (it has {count})"
        )));
    }
    Ok(n as usize - 1)
}

/// Fills form `index` of `page` with `fields`, if given.
fn fill(
    page: &mut Page,
    index: usize,
    fields: Option<&Map<String, Value>>,
) -> Result<(), ToolError> {
    let Some(fields) = fields else {
        return Ok(());
    };
    for (name, value) in fields {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                    "field `{name}` must be a string"
                )));
            }
        };
        page.forms[index]
            .set(name, &text)
            .map_err(ToolError::InvalidArguments)?;
    }
    Ok(())
}

#[async_trait]
impl Tool for Browser {
    fn spec(&self) -> ToolSpec {
        ToolSpec::function(
            Self::NAME,
            format!(
                "A text browser. Actions: open {{url}}; click {{link}} (the N of a `[N]` link); \
                 fill {{form, fields}} (fields by name); submit {{form, fields?}}; back. \
                 URLs must start with one of: {}",
                self.allow.describe()
            ),
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["open", "click", "fill", "submit", "back"]},
                    "url": {"type": "string", "description": "For open: an absolute URL."},
                    "link": {"type": "integer", "minimum": 1, "description": "For click: the link number."},
                    "form": {"type": "integer", "minimum": 1, "description": "For fill/submit: the form number (default 1)."},
                    "fields": {
                        "type": "object",
                        "additionalProperties": {"type": ["string", "number"]},
                        "description": "For fill/submit: values by field name."
                    }
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let args: BrowserArgs = parse_args(args)?;
        let mut state = self.state.lock().await;
        let request = match args.action.as_str() {
            "open" => {
                let url = args.url.as_deref().ok_or_else(|| {
                    ToolError::InvalidArguments("action `open` needs a string `url`".into())
                })?;
                Request::Get(self.allow.check(url)?)
            }
            "click" => {
                let page = current(&mut state)?;
                let index = number(args.link, "link", None, page.links.len(), "link")?;
                Request::Get(self.allow.check_url(&page.links[index])?)
            }
            "fill" => {
                let page = current(&mut state)?;
                let index = number(args.form, "form", Some(1), page.forms.len(), "form")?;
                if args.fields.is_none() {
                    return Err(ToolError::InvalidArguments(
                        "action `fill` needs `fields`".into(),
                    ));
                }
                fill(page, index, args.fields.as_ref())?;
                return Ok(page.forms[index].describe(index + 1));
            }
            "submit" => {
                let page = current(&mut state)?;
                let index = number(args.form, "form", Some(1), page.forms.len(), "form")?;
                fill(page, index, args.fields.as_ref())?;
                Request::Submit(page.forms[index].clone())
            }
            "back" => {
                let Some(previous) = state.history.pop() else {
                    return Err(ToolError::InvalidArguments(
                        "there is no earlier page to go back to".into(),
                    ));
                };
                let shown = previous.show();
                state.current = Some(previous);
                return Ok(shown);
            }
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "unknown action {other:?}; use open, click, fill, submit or back"
                )));
            }
        };
        let page = self.load(request).await?;
        Ok(Self::visit(&mut state, page))
    }
}
