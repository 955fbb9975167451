//! The `browser` tool against a small site on 127.0.0.1: rendering, links, forms (GET and
//! POST), back, redirects and allowlist refusals; and the HTML renderer on its own.

use std::collections::HashMap;

use agentrl_core::{Tool, ToolContext, ToolError};
use agentrl_tools::browser::{FieldKind, render};
use agentrl_tools::{Browser, UrlAllowlist, WebLimits};
use axum::Router;
use axum::extract::{Form, Query};
use axum::response::{Html, Redirect};
use axum::routing::{get, post};
use reqwest::Url;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const HOME: &str = r#"<html><head><title>Home</title><style>p{}</style></head><body>
<h1>Welcome</h1><script>var hidden = 1;</script>
<p>Go to <a href="/a">Page A</a> or <a href="b">Page B</a> or <a href="http://evil.invalid/">Elsewhere</a>.</p>
<form action="/search" method="get">
  <input type="text" name="q" value="">
  <select name="color"><option>red</option><option selected>blue</option></select>
  <input type="hidden" name="token" value="t9">
  <input type="submit" value="Search">
</form>
<form action="/login" method="post">
  <input name="user"><input type="radio" name="plan" value="free" checked><input type="radio" name="plan" value="pro">
  <button>Log in</button>
</form>
<a href="/redirect">Moved</a> <a href="/redirect-out">Moved away</a>
</body></html>"#;

async fn site() -> String {
    let app = Router::new()
        .route("/", get(|| async { Html(HOME) }))
        .route(
            "/a",
            get(|| async { Html("<title>A</title><p>This is page A. <a href='/'>Home</a></p>") }),
        )
        .route(
            "/b",
            get(|| async { Html("<title>B</title><p>This is page B.</p>") }),
        )
        .route(
            "/search",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                Html(format!(
                    "<p>Results for {} in {} ({})</p>",
                    q["q"], q["color"], q["token"]
                ))
            }),
        )
        .route(
            "/login",
            post(|Form(f): Form<HashMap<String, String>>| async move {
                Html(format!("<p>Hello {} on plan {}</p>", f["user"], f["plan"]))
            }),
        )
        .route("/redirect", get(|| async { Redirect::to("/a") }))
        .route(
            "/redirect-out",
            get(|| async { Redirect::to("http://evil.invalid/") }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn browser(base: &str) -> Browser {
    Browser::new(UrlAllowlist::new([base]).unwrap(), WebLimits::default())
}

async fn act(browser: &Browser, args: Value) -> Result<String, ToolError> {
    browser.call(args, &ToolContext::default()).await
}

#[tokio::test]
async fn links_forms_and_back() {
    let base = site().await;
    let b = browser(&base);
    let home = act(&b, json!({"action": "open", "url": format!("{base}/")}))
        .await
        .unwrap();
    assert!(
        home.contains("Title: Home") && home.contains("## Welcome"),
        "{home}"
    );
    assert!(
        home.contains("[1] Page A") && home.contains("[2] Page B"),
        "{home}"
    );
    assert!(home.contains("[3] Elsewhere"), "{home}");
    assert!(
        !home.contains("hidden = 1") && !home.contains("p{}"),
        "{home}"
    );
    assert!(
        home.contains("color = \"blue\" (options: red | blue)"),
        "{home}"
    );
    assert!(
        !home.contains("token"),
        "hidden fields are not shown: {home}"
    );

    let a = act(&b, json!({"action": "click", "link": 1}))
        .await
        .unwrap();
    assert!(a.contains("This is page A."), "{a}");
    let back = act(&b, json!({"action": "back"})).await.unwrap();
    assert!(back.contains("Title: Home"), "{back}");
    let page_b = act(&b, json!({"action": "click", "link": 2}))
        .await
        .unwrap();
    assert!(page_b.contains("This is page B."), "{page_b}");
    act(&b, json!({"action": "back"})).await.unwrap();

    let filled = act(
        &b,
        json!({"action": "fill", "form": 1, "fields": {"q": "lamp"}}),
    )
    .await
    .unwrap();
    assert!(filled.contains("q = \"lamp\""), "{filled}");
    let results = act(&b, json!({"action": "submit", "fields": {"color": "red"}}))
        .await
        .unwrap();
    assert!(
        results.contains("Results for lamp in red (t9)"),
        "{results}"
    );
    assert!(
        results.contains("/search?q=lamp&color=red&token=t9"),
        "{results}"
    );

    act(&b, json!({"action": "back"})).await.unwrap();
    let login = act(
        &b,
        json!({"action": "submit", "form": 2, "fields": {"user": "ann & bo"}}),
    )
    .await
    .unwrap();
    assert!(login.contains("Hello ann & bo on plan free"), "{login}");
    act(&b, json!({"action": "back"})).await.unwrap();
    let login = act(
        &b,
        json!({"action": "submit", "form": 2, "fields": {"user": "x", "plan": "pro"}}),
    )
    .await
    .unwrap();
    assert!(login.contains("on plan pro"), "{login}");
    assert_eq!(b.current_url().await.unwrap().path(), "/login");
}

#[tokio::test]
async fn redirects_are_followed_only_inside_the_allowlist() {
    let base = site().await;
    let b = browser(&base);
    act(&b, json!({"action": "open", "url": base}))
        .await
        .unwrap();
    let moved = act(&b, json!({"action": "click", "link": 4}))
        .await
        .unwrap();
    assert!(
        moved.contains("This is page A.") && moved.contains("/a"),
        "{moved}"
    );
    act(&b, json!({"action": "back"})).await.unwrap();
    let err = act(&b, json!({"action": "click", "link": 5}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("redirected to a refused URL"),
        "{err}"
    );
}

#[tokio::test]
async fn mistakes_get_clear_errors() {
    let base = site().await;
    let b = browser(&base);
    let invalid = |r: Result<String, ToolError>| match r {
        Err(ToolError::InvalidArguments(text)) => text,
        other => panic!("{other:?}"),
    };
    let text = invalid(act(&b, json!({"action": "click", "link": 1})).await);
    assert!(text.contains("no page is open"), "{text}");
    invalid(act(&b, json!({"action": "back"})).await);
    let text = invalid(act(&b, json!({"action": "open", "url": "http://evil.invalid/"})).await);
    assert!(text.contains("outside the allowlist"), "{text}");
    invalid(act(&b, json!({"action": "open"})).await);
    act(&b, json!({"action": "open", "url": base}))
        .await
        .unwrap();
    let text = invalid(act(&b, json!({"action": "click", "link": 3})).await);
    assert!(text.contains("evil.invalid"), "{text}");
    let text = invalid(act(&b, json!({"action": "click", "link": 99})).await);
    assert!(text.contains("no link 99"), "{text}");
    let text = invalid(act(&b, json!({"action": "fill", "fields": {"nope": "1"}})).await);
    assert!(
        text.contains("no field `nope`") && text.contains("q, color"),
        "{text}"
    );
    let text = invalid(act(&b, json!({"action": "fill", "fields": {"token": "1"}})).await);
    assert!(text.contains("no field `token`"), "{text}");
    let text = invalid(act(&b, json!({"action": "fill", "fields": {"color": "green"}})).await);
    assert!(text.contains("options: red, blue"), "{text}");
    invalid(act(&b, json!({"action": "fill", "form": 3, "fields": {}})).await);
    invalid(act(&b, json!({"action": "fill"})).await);
    invalid(act(&b, json!({"action": "dance"})).await);
}

#[tokio::test]
async fn each_browser_keeps_its_own_history() {
    let base = site().await;
    let (one, two) = (browser(&base), browser(&base));
    act(&one, json!({"action": "open", "url": format!("{base}/a")}))
        .await
        .unwrap();
    act(&one, json!({"action": "open", "url": format!("{base}/b")}))
        .await
        .unwrap();
    act(&two, json!({"action": "open", "url": format!("{base}/b")}))
        .await
        .unwrap();
    assert!(
        act(&one, json!({"action": "back"}))
            .await
            .unwrap()
            .contains("page A")
    );
    assert!(act(&two, json!({"action": "back"})).await.is_err());
    let handle = one.clone();
    handle.clear().await;
    assert!(
        one.current_url().await.is_none(),
        "clones share the session"
    );
}

#[test]
fn renderer_turns_html_into_text_links_and_forms() {
    let url = Url::parse("http://127.0.0.1:9/shop/").unwrap();
    let page = render(
        "<title> Shop </title><ul><li><a href='item/1'>Red  mug</a></li><li>Blue\n cup</li></ul>\
         <a href='mailto:x@y'>mail</a><form><select name='size'><option value='s'>Small</option></select></form>",
        &url,
        "HTTP 200 OK",
    );
    assert_eq!(page.title, "Shop");
    assert_eq!(
        page.links,
        vec![Url::parse("http://127.0.0.1:9/shop/item/1").unwrap()]
    );
    assert!(page.text.contains("- [1] Red mug\n"), "{}", page.text);
    assert!(
        page.text.contains("- Blue cup") && page.text.contains("mail"),
        "{}",
        page.text
    );
    assert_eq!(page.forms.len(), 1);
    assert_eq!(page.forms[0].action, url);
    assert_eq!(
        page.forms[0].fields[0].kind,
        FieldKind::Choice(vec!["s".into()])
    );
}
