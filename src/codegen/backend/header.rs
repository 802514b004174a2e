//! The C header of an object file (`codegen/aot.rs`): the context type,
//! the status codes under the evaluator's stable error names, and the
//! documented prototypes of the typed entry and of the slot-level one.
//!
//! C parameters come from the scalar leaves of the F̃ types, in slot order
//! (Note [Native layout] in `codegen/mod.rs`): Double is `double`, Index
//! `int64_t`, Bool `bool`, an array a pointer to its elements and an
//! `int64_t` length; a tuple contributes one parameter (or out-pointer) per
//! leaf. Elements of arrays keep the flat layout: `double`, `int64_t`,
//! `fsmooth_bool` (a byte padded to 8), `fsmooth_array` (a nested array's
//! pointer and length), and for tuples `void` with the layout in a comment.
//! The header is plain C11 and compiles with `-Wall -Wextra -Werror`.

use std::collections::BTreeSet;
use std::fmt::Write;

use cranelift_codegen::ir::types;

use super::aot::{CTX_LIMIT, CTX_SPARE, CTX_TEMPS, CTX_USED, c_identifier};
use super::runtime::{self as rt, CTX_A, CTX_B, CTX_SCRATCH};
use crate::codegen::layout;
use crate::codegen::{CodegenError, compile_error, unsupported};
use crate::ir::Type;

/// One parameter of the typed C entry.
#[derive(Clone, Debug)]
pub struct CParam {
    pub name: String,
    pub c_type: String,
    pub clif: types::Type,
    pub doc: String,
}

/// The status codes: macro suffix, value, the evaluator's error code, what
/// `ctx.a` and `ctx.b` hold.
pub const STATUSES: [(&str, i64, &str, &str); 12] = [
    ("OK", rt::OK, "ok", "success"),
    (
        "INDEX_OUT_OF_BOUNDS",
        rt::INDEX_OUT_OF_BOUNDS,
        "index-out-of-bounds",
        "a = the index, b = the array's length",
    ),
    (
        "NEGATIVE_SIZE",
        rt::NEGATIVE_SIZE,
        "negative-size",
        "a = the size given to `build` or `accum`",
    ),
    (
        "NEGATIVE_COUNT",
        rt::NEGATIVE_COUNT,
        "negative-count",
        "a = the count given to `ifold` or `iscan`",
    ),
    (
        "DIVISION_BY_ZERO",
        rt::DIVISION_BY_ZERO,
        "division-by-zero",
        "no details",
    ),
    (
        "INTEGER_OVERFLOW",
        rt::OVERFLOW,
        "integer-overflow",
        "a = the operator: 0 +, 1 -, 2 *, 3 /, 4 **",
    ),
    (
        "OUT_OF_MEMORY",
        rt::OUT_OF_MEMORY,
        "out-of-memory",
        "a = the bytes asked for (past ctx.limit, or malloc failed)",
    ),
    (
        "DOMAIN_ERROR_POW",
        rt::DOMAIN_POW,
        "domain-error",
        "Double **: a, b = the bits of x and y",
    ),
    (
        "DOMAIN_ERROR_IPOW",
        rt::DOMAIN_IPOW,
        "domain-error",
        "Index ** with a negative exponent: a = x, b = y",
    ),
    (
        "DOMAIN_ERROR_LOG",
        rt::DOMAIN_LOG,
        "domain-error",
        "log: a = the bits of x",
    ),
    (
        "DOMAIN_ERROR_SQRT",
        rt::DOMAIN_SQRT,
        "domain-error",
        "sqrt: a = the bits of x",
    ),
    (
        "DOMAIN_ERROR_TAN",
        rt::DOMAIN_TAN,
        "domain-error",
        "tan: a = the bits of x",
    ),
];

const C_RESERVED: [&str; 40] = [
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "ctx", "int64_t",
    "uint64_t",
];

/// A C keyword, or a name the header itself uses.
pub(super) fn is_c_reserved(name: &str) -> bool {
    C_RESERVED.contains(&name)
}

/// The C element type of an array of `t`, and a note on its layout.
fn elem_c(t: &Type) -> Result<(String, String), CodegenError> {
    Ok(match t {
        Type::Double => ("double".into(), String::new()),
        Type::Index => ("int64_t".into(), String::new()),
        Type::Bool => ("fsmooth_bool".into(), String::new()),
        Type::Array(_) => (
            "fsmooth_array".into(),
            format!(" (each element an {t} as a `fsmooth_array`)"),
        ),
        Type::Pair(..) => (
            "void".into(),
            format!(
                " (each element {} 8-byte slots: {})",
                layout::slots(t)?,
                slot_names(t)?
            ),
        ),
        Type::Fun(..) => return Err(unsupported(format!("a function value of type {t}"))),
    })
}

fn slot_names(t: &Type) -> Result<String, CodegenError> {
    let mut ls = Vec::new();
    layout::leaves(t, 0, &mut ls)?;
    Ok(ls
        .iter()
        .map(|l| match l {
            layout::Leaf::Double(_) => "double",
            layout::Leaf::Index(_) => "int64_t",
            layout::Leaf::Bool(_) => "fsmooth_bool",
            layout::Leaf::Array(..) => "fsmooth_array",
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// The scalar leaves of `t` with name suffixes: an n-tuple (right-nested
/// pairs) has components `_0` … `_{n-1}`, and a component that is itself
/// a tuple numbers its own (`_0_1`).
fn named_leaves(t: &Type, suffix: String, out: &mut Vec<(String, Type)>) {
    let mut parts = Vec::new();
    let mut rest = t;
    while let Type::Pair(a, b) = rest {
        parts.push(&**a);
        rest = b;
    }
    if parts.is_empty() {
        out.push((suffix, t.clone()));
        return;
    }
    parts.push(rest);
    for (i, part) in parts.into_iter().enumerate() {
        named_leaves(part, format!("{suffix}_{i}"), out);
    }
}

fn unique(name: String, used: &mut BTreeSet<String>) -> String {
    // `out…` names the result's out-pointers.
    let mut n = if C_RESERVED.contains(&name.as_str()) || name.starts_with("out") {
        format!("p_{name}")
    } else {
        name
    };
    while used.contains(&n) {
        n.push('_');
    }
    used.insert(n.clone());
    n
}

/// The C parameters of the entry's parameters, in order.
pub fn c_params(params: &[(String, Type)]) -> Result<Vec<CParam>, CodegenError> {
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    for (pname, pt) in params {
        let mut ls = Vec::new();
        named_leaves(pt, String::new(), &mut ls);
        for (suffix, t) in ls {
            let name = unique(format!("{}{suffix}", c_identifier(pname)), &mut used);
            let what = if suffix.is_empty() {
                format!("`{pname}`: {t}")
            } else {
                format!("component {} of `{pname}`: {t}", &suffix[1..])
            };
            match &t {
                Type::Double => out.push(param(name, "double", types::F64, what)),
                Type::Index => out.push(param(name, "int64_t", types::I64, what)),
                Type::Bool => out.push(param(name, "bool", types::I8, what)),
                Type::Array(e) => {
                    let (ec, note) = elem_c(e)?;
                    let len = unique(format!("{name}_len"), &mut used);
                    out.push(param(
                        name.clone(),
                        &format!("const {ec} *"),
                        types::I64,
                        format!("{what}, `{len}` elements{note}"),
                    ));
                    out.push(param(
                        len,
                        "int64_t",
                        types::I64,
                        format!("the length of `{name}` (>= 0)"),
                    ));
                }
                Type::Pair(..) | Type::Fun(..) => {
                    return Err(unsupported(format!("a parameter of type {t}")));
                }
            }
        }
    }
    Ok(out)
}

fn param(name: String, c_type: &str, clif: types::Type, doc: String) -> CParam {
    CParam {
        name,
        c_type: c_type.to_string(),
        clif,
        doc,
    }
}

/// The out-pointers of the result's leaves (`out`, or `out_0`, `out_1`, …).
pub fn c_results(result: &Type) -> Result<Vec<CParam>, CodegenError> {
    let mut ls = Vec::new();
    named_leaves(result, String::new(), &mut ls);
    let mut out = Vec::new();
    for (suffix, t) in ls {
        let name = format!("out{suffix}");
        let what = if suffix.is_empty() {
            format!("the result: {t}")
        } else {
            format!("component {} of the result: {t}", &suffix[1..])
        };
        let p = types::I64;
        match &t {
            Type::Double => out.push(param(name, "double *", p, what)),
            Type::Index => out.push(param(name, "int64_t *", p, what)),
            Type::Bool => out.push(param(name, "bool *", p, what)),
            Type::Array(e) => {
                let (ec, note) = elem_c(e)?;
                let len = format!("{name}_len");
                out.push(param(
                    name.clone(),
                    &format!("const {ec} **"),
                    p,
                    format!("{what}: receives a pointer to `*{len}` elements{note}"),
                ));
                out.push(param(
                    len,
                    "int64_t *",
                    p,
                    format!("receives the length of `*{name}`"),
                ));
            }
            Type::Pair(..) | Type::Fun(..) => {
                return Err(unsupported(format!("a result of type {t}")));
            }
        }
    }
    Ok(out)
}

fn fn_type(params: &[(String, Type)], result: &Type) -> String {
    let mut s = String::new();
    for (n, t) in params {
        let _ = write!(s, "({n}: {t}) -> ");
    }
    let _ = write!(s, "{result}");
    s
}

/// The text of the header.
pub fn header(
    symbol: &str,
    origin: &str,
    params: &[(String, Type)],
    result: &Type,
    cps: &[CParam],
    crs: &[CParam],
) -> Result<String, CodegenError> {
    if CTX_A != 8
        || CTX_B != 16
        || CTX_SCRATCH != 24
        || CTX_LIMIT != 32
        || CTX_USED != 40
        || CTX_TEMPS != 48
        || rt::ctx_window(0)[0] != 64
        || rt::ctx_window(1)[0] != 88
        || CTX_SPARE != 112
    {
        return Err(compile_error("fsmooth_ctx layout out of date"));
    }
    let guard = format!("FSMOOTH_{}_H", symbol.to_ascii_uppercase());
    let mut h = String::new();
    let w = &mut h;
    let _ = writeln!(w, "/* Generated by `fsmooth compile`: {origin}.");
    let _ = writeln!(w, " * Do not edit; link with the object file and -lm. */");
    let _ = writeln!(w, "#ifndef {guard}\n#define {guard}\n");
    let _ = writeln!(w, "#include <stdbool.h>\n#include <stdint.h>\n");
    let _ = writeln!(w, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    w.push_str(COMMON_HEAD);
    for (suffix, value, code, details) in STATUSES {
        let _ = writeln!(
            w,
            "#define FSMOOTH_{suffix:<20} {value:>2} /* {code}: {details} */"
        );
    }
    w.push_str(COMMON_TYPES);
    let _ = writeln!(
        w,
        "/* The name of a status: the evaluator's stable error code. */"
    );
    let _ = writeln!(
        w,
        "static inline const char *fsmooth_status_name(int64_t status) {{"
    );
    let _ = writeln!(w, "    switch (status) {{");
    for (suffix, _, code, _) in STATUSES {
        let _ = writeln!(w, "    case FSMOOTH_{suffix}: return \"{code}\";");
    }
    let _ = writeln!(w, "    default: return \"unknown-status\";\n    }}\n}}\n");
    w.push_str("#endif /* FSMOOTH_COMMON_V3 */\n\n");
    // The typed entry.
    let _ = writeln!(w, "/* {symbol}: {}", fn_type(params, result));
    let _ = writeln!(w, " *");
    let _ = writeln!(
        w,
        " * Returns FSMOOTH_OK and writes the result through the out-pointers,"
    );
    let _ = writeln!(
        w,
        " * or returns another FSMOOTH_* status (details in ctx->a, ctx->b) and"
    );
    let _ = writeln!(
        w,
        " * writes nothing. Result arrays live in ctx (or share an argument"
    );
    let _ = writeln!(
        w,
        " * array) until fsmooth_ctx_release(ctx). Arguments are only read."
    );
    let _ = writeln!(w, " *");
    let _ = writeln!(w, " *   ctx: the context arrays are allocated from");
    for p in cps.iter().chain(crs) {
        let _ = writeln!(w, " *   {}: {}", p.name, p.doc);
    }
    let _ = writeln!(w, " */");
    let _ = write!(w, "int64_t {symbol}(fsmooth_ctx *ctx");
    for p in cps.iter().chain(crs) {
        let sep = if p.c_type.ends_with('*') { "" } else { " " };
        let _ = write!(w, ",\n    {}{sep}{}", p.c_type, p.name);
    }
    let _ = writeln!(w, ");\n");
    // The slot-level entry.
    let _ = writeln!(
        w,
        "/* The slot-level entry of {symbol}: the parameters' slots one after"
    );
    let _ = writeln!(
        w,
        " * another in args, the result's slots in out (see \"Native layout\" in"
    );
    let _ = writeln!(
        w,
        " * fsmooth's src/codegen/mod.rs); same statuses and ownership as above. */"
    );
    let _ = writeln!(
        w,
        "int64_t {symbol}_slots(fsmooth_ctx *ctx, const uint64_t *args, uint64_t *out);\n"
    );
    let _ = writeln!(w, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    Ok(h)
}

const COMMON_HEAD: &str = "\
#ifndef FSMOOTH_COMMON_V3
#define FSMOOTH_COMMON_V3

/* Status codes returned by every fsmooth entry (0 is success). The names
 * are the stable error codes of the fsmooth evaluator. */
";

const COMMON_TYPES: &str = "
/* The call context. Initialise with FSMOOTH_CTX_INIT; pass it to any number
 * of calls; then fsmooth_ctx_release(&ctx) frees every array those calls
 * returned (and the context can be used again). Calling in a loop,
 * fsmooth_ctx_reset(&ctx) between calls drops the arrays but keeps their
 * memory for the next call. Not thread-safe: use one context per thread. */
typedef struct fsmooth_ctx {
    void *arena;     /* private: the blocks allocated so far */
    int64_t a;       /* error details, see the status codes */
    int64_t b;
    int64_t scratch; /* private */
    int64_t limit;   /* most bytes the context may hold; 0 for no limit */
    int64_t used;    /* bytes held now (in 64 KiB chunks and larger blocks) */
    void *temps[2];  /* private: blocks of arrays local to loop iterations */
    char *windows[2][3]; /* private: where those arrays are allocated */
    void *spare;     /* private: blocks kept by fsmooth_ctx_reset */
} fsmooth_ctx;

#define FSMOOTH_CTX_INIT {0, 0, 0, 0, 0, 0, {0, 0}, {{0, 0, 0}, {0, 0, 0}}, 0}

/* An element of an array of Bool: the first byte is 0 or 1. */
typedef struct fsmooth_bool {
    uint8_t value;
    uint8_t padding[7];
} fsmooth_bool;

/* An element of an array of arrays: a pointer to len elements. */
typedef struct fsmooth_array {
    const void *data;
    int64_t len;
} fsmooth_array;

/* Frees every array allocated from ctx and resets it (ctx may be NULL). */
void fsmooth_ctx_release(fsmooth_ctx *ctx);

/* Ends the life of every array allocated from ctx (results included) but
 * keeps their memory for later calls, which then take no new memory from
 * the system while they need no more than earlier ones did; `used` drops
 * to what loop-local blocks hold. fsmooth_ctx_release frees it all (ctx
 * may be NULL). */
void fsmooth_ctx_reset(fsmooth_ctx *ctx);

";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Diagnose;

    #[test]
    fn status_names_are_the_evaluators_codes() {
        let mut arena = rt::Arena::new(1);
        for (suffix, value, code, _) in STATUSES {
            let ctx = rt::Ctx::new(&mut arena);
            match rt::status_error(value, &ctx) {
                None => assert_eq!(code, "ok"),
                Some(e) => {
                    assert_eq!(e.code(), code, "{suffix}");
                    assert!(
                        suffix.starts_with(&code.to_ascii_uppercase().replace('-', "_")),
                        "{suffix} vs {code}"
                    );
                }
            }
        }
    }

    #[test]
    fn tuples_number_their_components() {
        let t = Type::pair(
            Type::pair(Type::Index, Type::Bool),
            Type::pair(Type::Double, Type::array(Type::Double)),
        );
        let names: Vec<String> = c_results(&t).unwrap().into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["out_0_0", "out_0_1", "out_1", "out_2", "out_2_len"]);
    }

    #[test]
    fn names_are_sanitised_and_unique() {
        let ps = vec![
            ("x'".to_string(), Type::Double),
            ("x_".to_string(), Type::array(Type::Index)),
            ("int".to_string(), Type::pair(Type::Bool, Type::Double)),
            ("out".to_string(), Type::Index),
        ];
        let names: Vec<String> = c_params(&ps).unwrap().into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["x_", "x__", "x___len", "int_0", "int_1", "p_out"]);
    }
}
