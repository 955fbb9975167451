//! Exact evaluation, formatting and every error kind of the calculator.

use agentrl_core::{Tool, ToolContext, ToolError};
use agentrl_tools::{CalcError, Calculator, Number, evaluate};

fn eval(expr: &str) -> String {
    evaluate(expr).unwrap().to_string()
}

#[test]
fn precedence_and_parentheses() {
    assert_eq!(eval("2+3*4"), "14");
    assert_eq!(eval("(2+3)*4"), "20");
    assert_eq!(eval("10-4-3"), "3");
    assert_eq!(eval("100/10/5"), "2");
    assert_eq!(eval("2*(3+(4-1))/3"), "4");
    assert_eq!(eval("97*105-4"), "10181");
}

#[test]
fn negatives_and_signs() {
    assert_eq!(eval("-3*-(2+1)"), "9");
    assert_eq!(eval("-42"), "-42");
    assert_eq!(eval("2--3"), "5");
    assert_eq!(eval("+-+7"), "-7");
    assert_eq!(eval("-(1/3)"), "-0.333333333333");
}

#[test]
fn decimals_and_whitespace() {
    assert_eq!(eval("1.25*4"), "5");
    assert_eq!(eval("  0.1 +\t0.2 "), "0.3");
    assert_eq!(eval(".5 + 3."), "3.5");
    assert_eq!(eval("1.50"), "1.5");
    assert_eq!(eval("6 × 7 ÷ 2 − 1"), "20");
}

#[test]
fn division_results() {
    assert_eq!(eval("1/8"), "0.125");
    assert_eq!(eval("-7/20"), "-0.35");
    assert_eq!(eval("1/3"), "0.333333333333");
    assert_eq!(eval("2/3"), "0.666666666667");
    assert_eq!(eval("22/7"), "3.14285714286");
    assert_eq!(eval("1/1024"), "0.0009765625");
    assert_eq!(eval("1/3*3"), "1");
    let third = evaluate("1/3").unwrap();
    assert_eq!((third.numer(), third.denom()), (1, 3));
    assert_eq!(third, Number::new(2, 6).unwrap());
    assert!(!third.is_integer());
    assert!((third.to_f64() - 1.0 / 3.0).abs() < 1e-15);
}

#[test]
fn large_and_small_values() {
    assert_eq!(eval("100000000000000/3"), "3.33333333333e13");
    assert_eq!(eval("1/3000000000"), "3.33333333333e-10");
    assert_eq!(eval("99999999999999999999*10"), "999999999999999999990");
}

#[test]
fn error_kinds() {
    assert_eq!(evaluate("   "), Err(CalcError::Empty));
    assert_eq!(evaluate(""), Err(CalcError::Empty));
    let e = evaluate("1+2x").unwrap_err();
    assert_eq!(
        e,
        CalcError::UnexpectedCharacter {
            ch: 'x',
            position: 3
        }
    );
    assert_eq!(e.to_string(), "unexpected character 'x' at position 3");
    assert_eq!(
        evaluate("(1+2"),
        Err(CalcError::UnbalancedParenthesis { position: 0 })
    );
    assert_eq!(
        evaluate("1+2)"),
        Err(CalcError::UnbalancedParenthesis { position: 3 })
    );
    assert!(
        evaluate("(1")
            .unwrap_err()
            .to_string()
            .contains("unbalanced parenthesis")
    );
    let e = evaluate("4/(2-2)").unwrap_err();
    assert_eq!(e, CalcError::DivisionByZero { position: 1 });
    assert_eq!(e.to_string(), "division by zero at position 1");
    assert_eq!(evaluate("1+"), Err(CalcError::UnexpectedEnd));
    assert_eq!(
        evaluate("1 2"),
        Err(CalcError::UnexpectedToken {
            token: "2".into(),
            position: 2
        })
    );
    assert_eq!(
        evaluate("*3"),
        Err(CalcError::UnexpectedToken {
            token: "*".into(),
            position: 0
        })
    );
    assert_eq!(
        evaluate("()"),
        Err(CalcError::UnexpectedToken {
            token: ")".into(),
            position: 1
        })
    );
    assert_eq!(
        evaluate("1+."),
        Err(CalcError::InvalidNumber { position: 2 })
    );
    assert_eq!(
        evaluate("1.2.3"),
        Err(CalcError::UnexpectedCharacter {
            ch: '.',
            position: 3
        })
    );
}

#[test]
fn overflow_is_an_error() {
    let e = evaluate("1000000000000000000000000000000000000000000").unwrap_err();
    assert_eq!(e, CalcError::NumberTooLarge { position: 0 });
    assert!(e.to_string().starts_with("number too large"));
    let big = "100000000000000000000000000000";
    let e = evaluate(&format!("{big}*{big}")).unwrap_err();
    assert_eq!(e, CalcError::Overflow { position: 30 });
    assert!(e.to_string().starts_with("number too large"));
    let tiny = format!("1/{big}/{big}");
    assert!(matches!(evaluate(&tiny), Err(CalcError::Overflow { .. })));
}

#[test]
fn deep_nesting_is_rejected_without_overflowing_the_stack() {
    let ok = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(eval(&ok), "1");
    let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(matches!(evaluate(&deep), Err(CalcError::TooDeep { .. })));
    let signs = format!("{}1", "-".repeat(100_001));
    assert_eq!(eval(&signs), "-1");
}

#[tokio::test]
async fn calculator_tool() {
    let ctx = ToolContext::default();
    let spec = Calculator.spec();
    assert_eq!(spec.name(), "calculator");
    assert_eq!(
        spec.function.description,
        "Evaluates an arithmetic expression exactly (+ - * / and parentheses)."
    );
    assert_eq!(spec.function.parameters["required"][0], "expression");
    let out = Calculator
        .call(serde_json::json!({"expression": "97*105-4"}), &ctx)
        .await;
    assert_eq!(out, Ok("10181".to_string()));
    let out = Calculator
        .call(serde_json::json!({"expression": "1/0"}), &ctx)
        .await;
    assert_eq!(
        out,
        Err(ToolError::Failed("division by zero at position 1".into()))
    );
    let out = Calculator.call(serde_json::json!({}), &ctx).await;
    assert!(matches!(out, Err(ToolError::InvalidArguments(_))));
}
