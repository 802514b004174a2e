//! The C signature of an object file's typed entry (`backend/aot.rs`),
//! which the wrapper implements and the header (`backend/header.rs`)
//! declares: C identifiers from F̃ names, and one C parameter per scalar
//! leaf of the F̃ parameters and one out-pointer per leaf of the result.
//!
//! C parameters come from the scalar leaves of the F̃ types, in slot order
//! (Note [Native layout] in `codegen/mod.rs`): Double is `double`, Index
//! `int64_t`, Bool `bool`, an array a pointer to its elements and an
//! `int64_t` length; a tuple contributes one parameter (or out-pointer) per
//! leaf. Elements of arrays keep the flat layout: `double`, `int64_t`,
//! `fsmooth_bool` (a byte padded to 8), `fsmooth_array` (a nested array's
//! pointer and length), and for tuples `void` with the layout in a comment.

use std::collections::BTreeSet;

use cranelift_codegen::ir::types;

use crate::codegen::layout;
use crate::codegen::{CodegenError, unsupported};
use crate::ir::Type;

/// One parameter of the typed C entry.
#[derive(Clone, Debug)]
pub struct CParam {
    pub name: String,
    pub c_type: String,
    pub clif: types::Type,
    pub doc: String,
}

/// A C identifier from an F̃ name: every character outside `[A-Za-z0-9_]`
/// (such as `'`) becomes `_`, and a leading digit gets a `_` before it.
pub fn c_identifier(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
