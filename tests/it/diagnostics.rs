//! Rendered diagnostics as insta snapshots: one malformed program (or bad
//! input) per test, rendered exactly as `fsmooth` prints it
//! (`prog.fsm:line:col: error[code]: message`, an excerpt, notes). The
//! snapshots are the reviewable record of what a user sees; review every
//! change to them (`cargo insta review`, or `INSTA_UPDATE=always`).

use fsmooth::cli::render_diagnostic;
use fsmooth::diagnostic::Diagnostic;
use fsmooth::eval::Limits;
use fsmooth::pipeline::Session;

const PATH: &str = "prog.fsm";

/// The first diagnostic of loading, monomorphising for `main`, reading
/// `input` and running `src` under `limits`.
fn diagnose_with(src: &str, input: Option<&str>, limits: Limits) -> Diagnostic {
    let result = (|| {
        let e = Session::load(src)?.entry("main")?;
        let args = e.read_input(input)?;
        e.run(args, limits, &mut |_, _| {})
            .map_err(|err| Diagnostic::from(&err))
    })();
    match result {
        Ok((v, _)) => panic!("expected an error, the program returned {v}"),
        Err(d) => d,
    }
}

/// `src` rendered as the CLI renders it, checked to carry `code`.
fn render(src: &str, input: Option<&str>, limits: Limits, code: &str) -> String {
    let d = diagnose_with(src, input, limits);
    assert_eq!(d.code, code, "wrong code for:\n{src}\n{d:?}");
    render_diagnostic(&d, PATH, src)
}

/// Snapshots the diagnostic of `src` (no input, default limits), which
/// must have code `code`; the snapshot is named after the test.
macro_rules! snap {
    ($src:expr, $code:expr) => {
        snap!($src, None, $code)
    };
    ($src:expr, $input:expr, $code:expr) => {
        insta::assert_snapshot!(render($src, $input, Limits::default(), $code))
    };
}

// ---- lexing and parsing ----------------------------------------------------

#[test]
fn unclosed_paren() {
    snap!("let main = (1.0 + 2.0\n", "unexpected-end-of-input");
}

#[test]
fn dangling_operator() {
    snap!("let main = 1.0 *\n", "unexpected-end-of-input");
}

#[test]
fn dangling_operator_before_next_def() {
    snap!(
        "let f = fun x -> x +\nlet main = f 1.0\n",
        "unexpected-token"
    );
}

#[test]
fn let_without_body() {
    snap!(
        "let main = fun (x: Double) ->\n  let y = x * x\n",
        "missing-let-body"
    );
}

#[test]
fn if_without_else() {
    snap!("let main = if true then 1.0\n", "unexpected-end-of-input");
}

#[test]
fn unexpected_character() {
    snap!("let main = 1.0 $ 2.0\n", "unexpected-character");
}

#[test]
fn unexpected_character_after_unicode() {
    // Columns count characters, not bytes: `×` is two bytes.
    snap!("let main = 2.0 × 3.0 @ 4.0\n", "unexpected-character");
}

#[test]
fn unterminated_comment() {
    snap!(
        "let main = 1.0\n(* a comment (* nested *) that never ends\n",
        "unterminated-comment"
    );
}

#[test]
fn bad_number_literal() {
    snap!("let main = 99999999999999999999 + 1\n", "invalid-number");
}

#[test]
fn unexpected_token() {
    snap!("let main = 1.0 in 2.0\n", "unexpected-token");
}

#[test]
fn unit_unsupported() {
    snap!("let main = ()\n", "unsupported-syntax");
}

#[test]
fn unknown_type_in_annotation() {
    snap!("let main = fun (x: Vec) -> x\n", "unknown-type");
}

// ---- typing ----------------------------------------------------------------

#[test]
fn unbound_variable() {
    snap!("let main = x + 1.0\n", "unbound-variable");
}

#[test]
fn recursive_definition() {
    snap!(
        "let fact = fun (n: Index) -> if n == 0 then 1 else n * fact (n - 1)\nlet main = fact 5\n",
        "unbound-variable"
    );
}

#[test]
fn mismatch_in_operator() {
    snap!("let main = 1.0 + true\n", "type-mismatch");
}

#[test]
fn mismatch_in_if_condition() {
    snap!("let main = if 1.0 then 2.0 else 3.0\n", "type-mismatch");
}

#[test]
fn mismatch_between_branches() {
    snap!(
        "let main = fun (c: Bool) -> if c then 1.0 else [2.0]\n",
        "type-mismatch"
    );
}

#[test]
fn mismatch_annotated_parameter() {
    snap!(
        "let f = fun (v: Vector) -> v.[0]\nlet main = f 3.0\n",
        "type-mismatch"
    );
}

#[test]
fn too_many_arguments() {
    snap!("let main = vectorDot [1.0] [2.0] [3.0]\n", "not-a-function");
}

#[test]
fn too_few_arguments() {
    snap!("let main = 1.0 + vectorDot [1.0]\n", "type-mismatch");
}

#[test]
fn function_in_array() {
    snap!("let main = [fun (x: Double) -> x]\n", "function-as-data");
}

#[test]
fn function_in_tuple() {
    snap!(
        "let main = (1.0, fun (x: Double) -> x + 1.0)\n",
        "function-as-data"
    );
}

#[test]
fn function_in_if_branch() {
    snap!(
        "let main = fun (c: Bool) -> if c then (fun x -> x + 1.0) else (fun x -> x)\n",
        "function-as-data"
    );
}

#[test]
fn infinite_type() {
    snap!("let main = fun f -> f f\n", "infinite-type");
}

#[test]
fn non_numeric_comparison() {
    snap!("let main = true < false\n", "not-numeric");
}

// ---- entries and inputs ------------------------------------------------------

#[test]
fn no_such_entry() {
    let src = "let square = fun (x: Double) -> x * x\nlet main = square 3.0\n";
    let loaded = Session::load(src).expect("loads");
    let d = match loaded.entry("nope") {
        Ok(_) => panic!("`nope` is not defined"),
        Err(d) => d,
    };
    assert_eq!(d.code, "no-entry");
    insta::assert_snapshot!(render_diagnostic(&d, PATH, src));
}

#[test]
fn entry_with_function_parameter() {
    snap!(
        "let main = fun (f: Double -> Double) (x: Double) -> f x\n",
        "bad-entry"
    );
}

const VEC_ENTRY: &str = "let main = fun (v: Vector) (i: Index) -> v.[i]\n";

#[test]
fn missing_input() {
    snap!(VEC_ENTRY, "input-parameters");
}

#[test]
fn bad_json_input() {
    snap!(VEC_ENTRY, Some("{\"v\": [1.0, 2.0"), "invalid-json");
}

#[test]
fn input_string_for_vector() {
    snap!(
        VEC_ENTRY,
        Some(r#"{"v": "1 2 3", "i": 0}"#),
        "input-mismatch"
    );
}

#[test]
fn input_float_for_index() {
    snap!(
        VEC_ENTRY,
        Some(r#"{"v": [1, 2], "i": 1.5}"#),
        "input-mismatch"
    );
}

#[test]
fn input_bad_vector_element() {
    snap!(
        VEC_ENTRY,
        Some(r#"{"v": [1.0, 2.0, true], "i": 0}"#),
        "input-mismatch"
    );
}

#[test]
fn input_missing_key() {
    snap!(VEC_ENTRY, Some(r#"{"v": [1.0]}"#), "input-parameters");
}

#[test]
fn input_extra_key() {
    snap!(
        VEC_ENTRY,
        Some(r#"{"v": [1.0], "i": 0, "j": 1}"#),
        "input-parameters"
    );
}

#[test]
fn input_wrong_positional_count() {
    snap!(VEC_ENTRY, Some("[[1.0]]"), "input-parameters");
}

// ---- evaluation ------------------------------------------------------------

#[test]
fn out_of_bounds_get() {
    snap!(
        "let main =\n  let v = [1.0, 2.0, 3.0]\n  v.[3]\n",
        "index-out-of-bounds"
    );
}

#[test]
fn out_of_bounds_get_from_input() {
    snap!(
        VEC_ENTRY,
        Some(r#"{"v": [1.0, 2.0], "i": -1}"#),
        "index-out-of-bounds"
    );
}

#[test]
fn log_of_negative() {
    snap!("let main =\n  let x = 0.0 - 2.0\n  log x\n", "domain-error");
}

#[test]
fn sqrt_of_negative() {
    snap!(
        "let main = fun (x: Double) -> sqrt (x - 10.0)\n",
        Some("[1.0]"),
        "domain-error"
    );
}

#[test]
fn division_by_zero() {
    snap!(
        "let main = fun (n: Index) -> 10 / (n - n)\n",
        Some("[3]"),
        "division-by-zero"
    );
}

#[test]
fn negative_build_size() {
    snap!(
        "let main = fun (n: Index) -> build (n - 5) (fun i -> toDouble i)\n",
        Some("[2]"),
        "negative-size"
    );
}

#[test]
fn out_of_fuel() {
    let src = "let main = ifold (fun acc i -> acc + toDouble i) 0.0 1000\n";
    insta::assert_snapshot!(render(src, None, Limits::with_fuel(100), "out-of-fuel"));
}
