//! The `spreadsheet` tool on a real SQLite-backed workbook: every op, bad ranges and
//! arguments, and the sheet state the ops leave behind.

use std::sync::Arc;

use agentrl_core::{ToolCall, ToolContext, ToolError};
use agentrl_tools::spreadsheet::{Aggregate, CellRef, Range};
use agentrl_tools::{Cell, Spreadsheet, ToolBox, ToolLimits, ToolOutcome, Workbook};
use serde_json::{Value, json};

fn n(x: f64) -> Cell {
    Cell::Number(x)
}

fn t(s: &str) -> Cell {
    Cell::text(s)
}

/// A workbook with sheet `stock`: a header row and three items.
fn book() -> Arc<Workbook> {
    let book = Workbook::new().unwrap();
    book.add_sheet(
        "stock",
        &[
            vec![t("Item"), t("Category"), t("Count"), t("Price")],
            vec![t("bolt"), t("hardware"), n(40.0), n(3.0)],
            vec![t("Nut"), t("hardware"), n(12.0), n(1.5)],
            vec![t("saw"), t("tools"), n(2.0), n(25.0)],
        ],
    )
    .unwrap();
    Arc::new(book)
}

fn toolbox(book: &Arc<Workbook>) -> ToolBox {
    ToolBox::new(ToolLimits::default())
        .with(Spreadsheet::new(Arc::clone(book)))
        .unwrap()
}

async fn raw(tools: &ToolBox, arguments: &str) -> ToolOutcome {
    let mut call = ToolCall::new("c1", "spreadsheet", &json!({}));
    call.function.arguments = arguments.to_string();
    tools.dispatch(&call, &ToolContext::default()).await
}

async fn op(tools: &ToolBox, args: Value) -> ToolOutcome {
    raw(tools, &args.to_string()).await
}

async fn ok(tools: &ToolBox, args: Value) -> String {
    let out = op(tools, args.clone()).await;
    assert!(out.is_ok(), "{args}: {out:?}");
    out.message.text().to_string()
}

#[tokio::test]
async fn lists_and_reads_ranges() {
    let book = book();
    let tools = toolbox(&book);
    assert_eq!(
        ok(&tools, json!({"op": "sheets"})).await,
        "stock: A1:D4 (4 rows with values)"
    );
    let text = ok(
        &tools,
        json!({"op": "read", "sheet": "stock", "range": "D3:B2"}),
    )
    .await;
    assert_eq!(
        text,
        "stock B2:D3\nrow | B | C | D\n2 | hardware | 40 | 3\n3 | hardware | 12 | 1.5"
    );
    // The only sheet is used when `sheet` is left out; rows past the data read empty.
    let text = ok(&tools, json!({"op": "read", "range": "a4:b5"})).await;
    assert_eq!(text, "stock A4:B5\nrow | A | B\n4 | saw | tools\n5 |  | ");
}

#[tokio::test]
async fn looks_up_by_letter_or_header() {
    let book = book();
    let tools = toolbox(&book);
    let text = ok(
        &tools,
        json!({"op": "lookup", "column": "Category", "value": "HARDWARE"}),
    )
    .await;
    assert_eq!(
        text,
        "2 rows in stock where B = \"HARDWARE\":\n\
         row 2 | A: bolt | B: hardware | C: 40 | D: 3\n\
         row 3 | A: Nut | B: hardware | C: 12 | D: 1.5"
    );
    let text = ok(
        &tools,
        json!({"op": "lookup", "column": "A", "value": " nut "}),
    )
    .await;
    assert!(
        text.starts_with("1 row in stock where A") && text.contains("row 3 |"),
        "{text}"
    );
    // Numbers match numerically, also when given as text.
    let text = ok(
        &tools,
        json!({"op": "lookup", "column": "C", "value": "40"}),
    )
    .await;
    assert!(text.contains("row 2 |"), "{text}");
    let text = ok(&tools, json!({"op": "lookup", "column": "d", "value": 1.5})).await;
    assert!(text.contains("row 3 |"), "{text}");
    let text = ok(
        &tools,
        json!({"op": "lookup", "column": "A", "value": "drill"}),
    )
    .await;
    assert_eq!(text, "no rows in stock where A = \"drill\"");
}

#[tokio::test]
async fn writes_and_appends_change_the_sheet() {
    let book = book();
    let tools = toolbox(&book);
    let text = ok(
        &tools,
        json!({"op": "write", "sheet": "stock", "cell": "C3", "value": 15}),
    )
    .await;
    assert_eq!(text, "C3 = 15 (was 12)");
    let text = ok(
        &tools,
        json!({"op": "write", "cell": "F9", "value": "note"}),
    )
    .await;
    assert_eq!(text, "F9 = note (was )");
    let text = ok(
        &tools,
        json!({"op": "append", "values": ["drill", "tools", 4, null, 99.5]}),
    )
    .await;
    assert_eq!(text, "appended row 10: drill | tools | 4 |  | 99.5");
    assert_eq!(
        book.get("stock", CellRef::parse("C3").unwrap()).unwrap(),
        n(15.0)
    );
    let rows = book.cells("stock").unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(
        rows[4],
        (
            9,
            vec![
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                t("note")
            ]
        )
    );
    assert_eq!(
        rows[5],
        (
            10,
            vec![
                t("drill"),
                t("tools"),
                n(4.0),
                Cell::Empty,
                n(99.5),
                Cell::Empty
            ]
        )
    );
    // Clearing a cell.
    ok(&tools, json!({"op": "write", "cell": "F9", "value": null})).await;
    assert_eq!(book.cells("stock").unwrap().len(), 5);
}

#[tokio::test]
async fn aggregates_numbers_in_a_range() {
    let book = book();
    let tools = toolbox(&book);
    let agg = |range: &str, f: &str| json!({"op": "aggregate", "range": range, "function": f});
    assert_eq!(
        ok(&tools, agg("C2:C4", "sum")).await,
        "sum of C2:C4 = 54 (3 numeric cells)"
    );
    assert_eq!(
        ok(&tools, agg("C1:C9", "max")).await,
        "max of C1:C9 = 40 (3 numeric cells)"
    );
    assert_eq!(
        ok(&tools, agg("C2:D4", "min")).await,
        "min of C2:D4 = 1.5 (6 numeric cells)"
    );
    assert_eq!(
        ok(&tools, agg("D2:D3", "avg")).await,
        "avg of D2:D3 = 2.25 (2 numeric cells)"
    );
    assert_eq!(
        ok(&tools, agg("A1:A9", "count")).await,
        "count of A1:A9 = 4 (4 non-empty cells)"
    );
    let none = op(&tools, agg("A1:B4", "avg")).await;
    assert!(matches!(none.error, Some(ToolError::Failed(_))), "{none:?}");
    assert_eq!(
        book.aggregate(
            "stock",
            &Range::parse("A1:B4").unwrap(),
            Aggregate::Sum,
            None
        )
        .unwrap(),
        (Some(0.0), 0)
    );
}

#[tokio::test]
async fn aggregates_whole_columns_and_filtered_rows() {
    let book = book();
    let tools = toolbox(&book);
    let agg = |range: &str, f: &str| json!({"op": "aggregate", "range": range, "function": f});
    // A whole column: the text header is skipped by `sum`, counted by `count`.
    assert_eq!(
        ok(&tools, agg("C:C", "sum")).await,
        "sum of C:C = 54 (3 numeric cells)"
    );
    assert_eq!(
        ok(&tools, agg("A:A", "count")).await,
        "count of A:A = 4 (4 non-empty cells)"
    );
    // Rows where column B (by letter or header, matched as `lookup` matches) is a value.
    let sumif = |range: &str, column: &str, value: Value| {
        json!({"op": "aggregate", "range": range, "function": "sum", "column": column,
               "value": value})
    };
    assert_eq!(
        ok(&tools, sumif("C:C", "Category", json!(" HARDWARE"))).await,
        "sum of C:C where B = \" HARDWARE\" = 52 (2 numeric cells)"
    );
    assert_eq!(
        ok(&tools, sumif("C2:D4", "B", json!("tools"))).await,
        "sum of C2:D4 where B = \"tools\" = 27 (2 numeric cells)"
    );
    // A numeric filter value matches numbers; a range's rows still bound the filter.
    assert_eq!(
        ok(&tools, sumif("D:D", "Count", json!("12"))).await,
        "sum of D:D where C = \"12\" = 1.5 (1 numeric cells)"
    );
    assert_eq!(
        ok(&tools, sumif("C3:C4", "Category", json!("hardware"))).await,
        "sum of C3:C4 where B = \"hardware\" = 12 (1 numeric cells)"
    );
    assert_eq!(
        ok(&tools, sumif("C:C", "Category", json!("paint"))).await,
        "sum of C:C where B = \"paint\" = 0 (0 numeric cells)"
    );
    let none = op(
        &tools,
        json!({"op": "aggregate", "range": "C:C", "function": "max", "column": "B",
               "value": "paint"}),
    )
    .await;
    assert!(
        none.message
            .text()
            .contains("C:C where B = \"paint\" holds no numbers"),
        "{none:?}"
    );
    // The filter needs both halves and a real column.
    for args in [
        json!({"op": "aggregate", "range": "C:C", "function": "sum", "column": "B"}),
        json!({"op": "aggregate", "range": "C:C", "function": "sum", "value": "tools"}),
        json!({"op": "aggregate", "range": "C:C", "function": "sum", "column": "Colour",
               "value": "red"}),
    ] {
        let out = op(&tools, args.clone()).await;
        assert!(out.is_invalid_action(), "{args}: {out:?}");
    }
    assert_eq!(
        book.cells("stock").unwrap().len(),
        4,
        "aggregates write nothing"
    );
}

#[tokio::test]
async fn adds_to_numeric_cells_only() {
    let book = book();
    let tools = toolbox(&book);
    let add = |cell: &str, value: Value| json!({"op": "add", "cell": cell, "value": value});
    assert_eq!(ok(&tools, add("C2", json!(15))).await, "C2 = 55 (was 40)");
    assert_eq!(
        ok(&tools, add("c3", json!(" -2.5"))).await,
        "C3 = 9.5 (was 12)"
    );
    // An empty cell counts as 0.
    assert_eq!(ok(&tools, add("F7", json!(3))).await, "F7 = 3 (was )");
    assert_eq!(
        book.get("stock", CellRef::parse("C2").unwrap()).unwrap(),
        n(55.0)
    );
    // Text in the cell is a failure that leaves it alone; a non-number is invalid.
    let text = op(&tools, add("A2", json!(1))).await;
    assert!(matches!(text.error, Some(ToolError::Failed(_))), "{text:?}");
    assert!(
        text.message.text().contains("A2 holds the text \"bolt\""),
        "{text:?}"
    );
    assert_eq!(
        book.get("stock", CellRef::parse("A2").unwrap()).unwrap(),
        t("bolt")
    );
    for value in [json!("many"), json!(null), json!([1])] {
        let out = op(&tools, add("C2", value.clone())).await;
        assert!(out.is_invalid_action(), "{value}: {out:?}");
    }
    ok(&tools, add("F7", json!(1.7e308))).await;
    let huge = op(&tools, add("F7", json!(1.7e308))).await;
    assert!(
        huge.message.text().contains("not a finite number"),
        "{huge:?}"
    );
    huge.error.expect("an overflowing add fails");
    let kept = book.get("stock", CellRef::parse("F7").unwrap()).unwrap();
    assert_eq!(kept, n(3.0 + 1.7e308));
}

#[tokio::test]
async fn bad_ranges_and_arguments_are_refused() {
    let book = book();
    let tools = toolbox(&book);
    for bad in ["B2:", "2B", "AA1", "A0", "B2:C3:D4", "A1:Z100"] {
        let out = op(&tools, json!({"op": "read", "range": bad})).await;
        assert!(out.is_invalid_action(), "{bad}: {out:?}");
        assert!(
            out.message.text().starts_with("error: invalid arguments"),
            "{bad}: {out:?}"
        );
    }
    let invalid = [
        "{not json",
        r#"{"op": "explode"}"#,
        r#"{"op": "read"}"#,
        r#"{"op": "read", "range": 5}"#,
        r#"{"op": "write", "cell": "C2"}"#,
        r#"{"op": "write", "cell": "C2", "value": [1]}"#,
        r#"{"op": "append", "values": []}"#,
        r#"{"op": "aggregate", "range": "C2:C4", "function": "median"}"#,
        r#"{"op": "lookup", "column": "Colour", "value": "red"}"#,
        r#"{"op": "read", "range": "A1", "extra": true}"#,
    ];
    for arguments in invalid {
        let out = raw(&tools, arguments).await;
        assert!(out.is_invalid_action(), "{arguments}: {out:?}");
    }
    let missing = op(
        &tools,
        json!({"op": "read", "sheet": "nope", "range": "A1"}),
    )
    .await;
    assert!(
        missing
            .message
            .text()
            .contains("no sheet named \"nope\" (sheets: stock)"),
        "{missing:?}"
    );
    // Nothing changed.
    assert_eq!(book.cells("stock").unwrap().len(), 4);
}

#[tokio::test]
async fn sheet_names_are_checked_and_required_with_several_sheets() {
    let book = book();
    assert!(book.add_sheet("bad name; DROP", &[]).is_err());
    assert!(book.add_sheet("stock", &[]).is_err());
    book.add_sheet("Orders_2", &[vec![t("id")]]).unwrap();
    let tools = toolbox(&book);
    let out = op(&tools, json!({"op": "read", "range": "A1"})).await;
    assert!(
        out.message
            .text()
            .contains("needs the `sheet` argument (sheets: Orders_2, stock)"),
        "{out:?}"
    );
    assert_eq!(
        ok(
            &tools,
            json!({"op": "read", "sheet": "Orders_2", "range": "A1"})
        )
        .await,
        "Orders_2 A1\nrow | A\n1 | id"
    );
}
