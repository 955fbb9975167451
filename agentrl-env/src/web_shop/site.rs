//! The shop web site a session serves: a search page, paged results, product pages with size
//! and colour options, and a buy form whose purchase is recorded in the shared state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::routing::{get, post};

use super::catalog::{Product, Purchase, Shop};

/// Results shown per page.
pub const PAGE_SIZE: usize = 5;

/// The shop of the episode in progress and its purchase, if any.
#[derive(Debug, Clone)]
pub struct Store {
    /// The task's shop.
    pub shop: Shop,
    /// The purchase made, once the agent buys.
    pub purchase: Option<Purchase>,
}

/// The state behind the site.
pub type Shared = Arc<Mutex<Option<Store>>>;

/// Locks `shared`, recovering from a poisoned lock.
pub fn lock(shared: &Shared) -> MutexGuard<'_, Option<Store>> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// A page: status and HTML.
type Page = (StatusCode, Html<String>);

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A whole HTML page with `title` and `body`.
fn page(status: StatusCode, title: &str, body: &str) -> Page {
    let title = escape(title);
    (
        status,
        Html(format!(
            "<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
        )),
    )
}

/// Runs `work` on the store, or answers 503 when no episode is in progress.
fn with_store(shared: &Shared, work: impl FnOnce(&mut Store) -> Page) -> Page {
    match lock(shared).as_mut() {
        Some(store) => work(store),
        None => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Closed",
            "<p>No episode is in progress.</p>",
        ),
    }
}

/// The site's routes.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/search", get(search))
        .route("/product/{id}", get(product))
        .route("/buy", post(buy))
        .with_state(shared)
}

/// The search form.
const SEARCH_FORM: &str = r#"<form action="/search" method="get"><input type="text" name="q" value=""><input type="submit" value="Search"></form>"#;

/// `GET /`: the search page.
async fn home(State(shared): State<Shared>) -> Page {
    with_store(&shared, |_| {
        page(
            StatusCode::OK,
            "Web Shop",
            &format!("<p>Search our catalogue.</p>{SEARCH_FORM}"),
        )
    })
}

/// Lower-case words of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// How many distinct words of `query` the product's title, category and attributes hold.
fn relevance(product: &Product, query: &[String]) -> usize {
    let mut text = words(&product.title);
    text.extend(words(&product.category));
    text.extend(product.attributes.iter().flat_map(|a| words(a)));
    query.iter().filter(|q| text.contains(q)).count()
}

/// `GET /search?q=...&page=N`: matching products, most relevant first, [`PAGE_SIZE`] a page.
async fn search(
    State(shared): State<Shared>,
    Query(params): Query<HashMap<String, String>>,
) -> Page {
    let q = params
        .get("q")
        .map(|q| q.trim().to_string())
        .unwrap_or_default();
    let number: usize = match params.get("page").map(|p| p.parse::<usize>()) {
        None => 1,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => {
            return page(
                StatusCode::BAD_REQUEST,
                "Bad request",
                "<p>`page` must be a whole number from 1.</p>",
            );
        }
    };
    if q.is_empty() {
        return page(
            StatusCode::BAD_REQUEST,
            "Bad request",
            &format!("<p>Type something to search for.</p>{SEARCH_FORM}"),
        );
    }
    with_store(&shared, |store| {
        let query = words(&q);
        let mut hits: Vec<(usize, &Product)> = store
            .shop
            .products
            .iter()
            .map(|p| (relevance(p, &query), p))
            .filter(|(r, _)| *r > 0)
            .collect();
        hits.sort_by_key(|(r, _)| std::cmp::Reverse(*r));
        let pages = hits.len().div_ceil(PAGE_SIZE).max(1);
        let title = format!("Results for {q} (page {number} of {pages})");
        let mut body = String::from("<ul>");
        for (_, p) in hits.iter().skip((number - 1) * PAGE_SIZE).take(PAGE_SIZE) {
            body.push_str(&format!(
                "<li><a href=\"/product/{}\">{}</a> | ${}</li>",
                p.id,
                escape(&p.title),
                p.price
            ));
        }
        body.push_str("</ul>");
        if hits.is_empty() {
            body.push_str("<p>No products match.</p>");
        }
        let link = |n: usize, label: &str| {
            format!(
                "<a href=\"/search?q={}&amp;page={n}\">{label}</a> ",
                encode(&q)
            )
        };
        if number > 1 {
            body.push_str(&link(number - 1, "Previous page"));
        }
        if number < pages {
            body.push_str(&link(number + 1, "Next page"));
        }
        body.push_str("<p><a href=\"/\">Back to search</a></p>");
        page(StatusCode::OK, &title, &body)
    })
}

/// `text` percent-encoded for a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `<select>` of `options`.
fn select(name: &str, options: &[String]) -> String {
    let options: String = options
        .iter()
        .map(|o| format!("<option>{}</option>", escape(o)))
        .collect();
    format!("<p>{name}: <select name=\"{name}\">{options}</select></p>")
}

/// `GET /product/{id}`: title, price, features and the buy form.
async fn product(State(shared): State<Shared>, Path(id): Path<String>) -> Page {
    with_store(&shared, |store| {
        let Some(p) = store.shop.product(&id) else {
            return page(
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("<p>No product {}.</p>", escape(&id)),
            );
        };
        let body = format!(
            "<p>Price: ${}</p><p>Category: {}</p><p>Features: {}</p>\
             <form action=\"/buy\" method=\"post\"><input type=\"hidden\" name=\"product\" value=\"{}\">{}{}<button>Buy now</button></form>\
             <p><a href=\"/\">Back to search</a></p>",
            p.price,
            escape(&p.category),
            escape(&p.attributes.join(", ")),
            p.id,
            select("size", &p.sizes),
            select("colour", &p.colours),
        );
        page(StatusCode::OK, &p.title, &body)
    })
}

/// `POST /buy` (form `product`, `size`, `colour`): records the purchase; one per episode.
async fn buy(
    State(shared): State<Shared>,
    form: Result<axum::Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Page {
    let Ok(axum::Form(form)) = form else {
        return page(
            StatusCode::BAD_REQUEST,
            "Bad request",
            "<p>The order form could not be read.</p>",
        );
    };
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let (id, size, colour) = (field("product"), field("size"), field("colour"));
    with_store(&shared, |store| {
        if store.purchase.is_some() {
            return page(
                StatusCode::CONFLICT,
                "Already ordered",
                "<p>You have already placed your order.</p>",
            );
        }
        let Some(p) = store.shop.product(&id) else {
            return page(
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("<p>No product {}.</p>", escape(&id)),
            );
        };
        if !p.sizes.contains(&size) || !p.colours.contains(&colour) {
            return page(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Option not offered",
                "<p>Choose a size and colour this product is offered in.</p>",
            );
        }
        let text = format!(
            "<p>Order placed: {} (size {}, colour {}) for ${}.</p>",
            escape(&p.title),
            escape(&size),
            escape(&colour),
            p.price
        );
        store.purchase = Some(Purchase {
            product: id.clone(),
            size,
            colour,
        });
        page(StatusCode::OK, "Thank you", &text)
    })
}
