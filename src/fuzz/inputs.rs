//! JSON inputs for an entry, generated against its parameter types:
//! valid ones (small arrays, interesting Doubles: ±0, tiny, huge, the
//! `"NaN"`/`"Infinity"` spellings `interchange` accepts) and malformed
//! ones — a wrong type somewhere, other NaN and infinity spellings,
//! `1e309`, integers past 2⁶³, fractions for an Index, ragged matrices,
//! nesting 200,000 deep, vectors of up to 10⁶ elements, missing, extra
//! and duplicate keys, the wrong number of positional arguments, text
//! that is not JSON (trailing garbage, comments, single quotes, invalid
//! UTF-8, a byte-order mark).
//!
//! Inputs are built as a small JSON tree ([`J`]) so that a mutation can
//! replace any node, then printed; the printer writes numbers verbatim,
//! so `1e309` reaches the command line's JSON reader as written.

use crate::ir::Type;

use super::choices::Choices;

/// A JSON document under construction.
#[derive(Clone, Debug)]
pub enum J {
    /// A number (or any other text), written verbatim.
    Raw(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn write(&self, out: &mut String) {
        match self {
            J::Raw(s) => out.push_str(s),
            J::Str(s) => {
                out.push('"');
                out.push_str(s);
                out.push('"');
            }
            J::Arr(xs) => {
                out.push('[');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write(out);
                }
                out.push(']');
            }
            J::Obj(kvs) => {
                out.push('{');
                for (i, (k, v)) in kvs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push('"');
                    out.push_str(k);
                    out.push_str("\": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }

    /// The number of nodes.
    fn size(&self) -> usize {
        1 + match self {
            J::Arr(xs) => xs.iter().map(J::size).sum(),
            J::Obj(kvs) => kvs.iter().map(|(_, v)| v.size()).sum(),
            _ => 0,
        }
    }

    /// The `k`-th node in pre-order (the root when `k` is past the end).
    fn node(&mut self, k: usize) -> &mut J {
        fn path(j: &J, k: &mut usize, out: &mut Vec<usize>) -> bool {
            if *k == 0 {
                return true;
            }
            *k -= 1;
            let children: Vec<&J> = match j {
                J::Arr(xs) => xs.iter().collect(),
                J::Obj(kvs) => kvs.iter().map(|(_, v)| v).collect(),
                _ => Vec::new(),
            };
            for (i, x) in children.into_iter().enumerate() {
                out.push(i);
                if path(x, k, out) {
                    return true;
                }
                out.pop();
            }
            false
        }
        let mut p = Vec::new();
        if !path(self, &mut k.clone(), &mut p) {
            p.clear();
        }
        let mut j = self;
        for i in p {
            j = match j {
                J::Arr(xs) => &mut xs[i],
                J::Obj(kvs) => &mut kvs[i].1,
                other => return other,
            };
        }
        j
    }
}

const DOUBLES: &[&str] = &[
    "0.7",
    "-1.3",
    "2.9",
    "0.4",
    "1",
    "0",
    "-0.0",
    "1e-300",
    "5e-324",
    "1.7976931348623157e308",
    "3.5",
    "-2",
    "100.25",
    "0.001",
];

/// A valid JSON value of type `t` (arrays of 0–6 elements; Vectors of
/// at least `min_len`).
pub fn valid(c: &mut Choices, t: &Type, min_len: usize) -> J {
    match t {
        Type::Double => {
            if c.one_in(25) {
                J::Str(c.pick(&["NaN", "Infinity", "-Infinity"]).to_string())
            } else {
                J::Raw(c.pick(DOUBLES).to_string())
            }
        }
        Type::Index => J::Raw(format!("{}", c.below(5))),
        Type::Bool => J::Raw(if c.one_in(2) { "true" } else { "false" }.into()),
        Type::Array(e) => {
            let n = if c.one_in(12) {
                0
            } else {
                c.range(min_len.max(1), 6.max(min_len))
            };
            // Rows of a matrix have one length (a ragged one is a
            // malformed input's business).
            if let Type::Array(inner) = &**e {
                let k = c.range(1, 4);
                return J::Arr(
                    (0..n)
                        .map(|_| J::Arr((0..k).map(|_| valid(c, inner, 0)).collect()))
                        .collect(),
                );
            }
            J::Arr((0..n).map(|_| valid(c, e, 0)).collect())
        }
        Type::Pair(a, b) => J::Arr(vec![valid(c, a, min_len), valid(c, b, min_len)]),
        Type::Fun(..) => J::Raw("null".into()),
    }
}

/// Valid arguments for `params`: an object keyed by name, or (now and
/// then) a positional array.
pub fn arguments(c: &mut Choices, params: &[(String, Type)], min_len: usize) -> J {
    let values: Vec<(String, J)> = params
        .iter()
        .map(|(n, t)| (n.clone(), valid(c, t, min_len)))
        .collect();
    if params.len() != 1 && c.one_in(4) {
        return J::Arr(values.into_iter().map(|(_, v)| v).collect());
    }
    if params.len() == 1 && !matches!(params[0].1, Type::Array(_) | Type::Pair(..)) && c.one_in(5) {
        return values.into_iter().next().map(|(_, v)| v).expect("one");
    }
    J::Obj(values)
}

/// Arguments for `params` with a defect; `huge` allows 10⁶-element
/// vectors. Returns the bytes and what was done.
pub fn malformed(c: &mut Choices, params: &[(String, Type)], huge: bool) -> (Vec<u8>, String) {
    let mut j = arguments(c, params, 0);
    let size = j.size();
    let at = c.below(size);
    let what = match c.weighted(&[6, 4, 2, 2, 2, 2, 2, 1, 2, 2, 2, 3]) {
        0 => {
            let v = c
                .pick(&[
                    "null", "true", "\"1.5\"", "[]", "{}", "[1.0]", "[[1.0]]", "1.5", "-3", "\"x\"",
                ])
                .to_string();
            *j.node(at) = J::Raw(v.clone());
            format!("node {at} replaced by {v}")
        }
        1 => {
            let v = c
                .pick(&[
                    "NaN",
                    "Infinity",
                    "-Infinity",
                    "\"nan\"",
                    "\"NaN\"",
                    "\"+Infinity\"",
                    "\"inf\"",
                    "\"-inf\"",
                    "\"Infinity \"",
                    "nan",
                    "inf",
                ])
                .to_string();
            *j.node(at) = J::Raw(v.clone());
            format!("node {at} replaced by {v}")
        }
        2 => {
            let v = c
                .pick(&["1e309", "-1e309", "1e-400", "2.5e+308", "0e999999999"])
                .to_string();
            *j.node(at) = J::Raw(v.clone());
            format!("node {at} replaced by {v}")
        }
        3 => {
            let v = c
                .pick(&[
                    "9223372036854775807",
                    "9223372036854775808",
                    "-9223372036854775809",
                    "18446744073709551616",
                    "1.0",
                    "2.5",
                    "-1",
                    "1e2",
                    "100000000000000000000000000000",
                ])
                .to_string();
            *j.node(at) = J::Raw(v.clone());
            format!("node {at} replaced by {v}")
        }
        4 => {
            // A ragged matrix.
            *j.node(at) = J::Raw("[[1.0, 2.0], [3.0]]".into());
            format!("node {at} replaced by a ragged matrix")
        }
        5 => {
            let n = if c.one_in(2) {
                200_000
            } else {
                c.range(100, 5_000)
            };
            let deep = format!("{}1.0{}", "[".repeat(n), "]".repeat(n));
            *j.node(at) = J::Raw(deep);
            format!("node {at} replaced by an array nested {n} deep")
        }
        6 if huge => {
            let n = if c.one_in(3) {
                1_000_000
            } else {
                c.range(1_000, 100_000)
            };
            let mut s = String::with_capacity(n * 5);
            s.push('[');
            for i in 0..n {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(if i % 2 == 0 { "1.5" } else { "-2" });
            }
            s.push(']');
            *j.node(at) = J::Raw(s);
            format!("node {at} replaced by a vector of {n} elements")
        }
        7 => {
            // A key changed, removed or repeated.
            if let J::Obj(kvs) = &mut j {
                if kvs.is_empty() {
                    kvs.push(("extra".into(), J::Raw("1".into())));
                    return (j.text().into_bytes(), "an extra key".into());
                }
                let k = c.below(kvs.len());
                match c.below(4) {
                    0 => {
                        kvs.remove(k);
                        "a missing key".into()
                    }
                    1 => {
                        let dup = kvs[k].clone();
                        kvs.push(dup);
                        "a duplicate key".into()
                    }
                    2 => {
                        kvs[k].0.push('x');
                        "a misspelt key".into()
                    }
                    _ => {
                        kvs[k].0 = String::new();
                        "an empty key".into()
                    }
                }
            } else {
                "no object to change keys of".into()
            }
        }
        8 => {
            if let J::Arr(xs) = &mut j {
                if c.one_in(2) || xs.is_empty() {
                    xs.push(J::Raw("1.0".into()));
                    "one positional argument too many".into()
                } else {
                    xs.pop();
                    "one positional argument too few".into()
                }
            } else {
                j = J::Arr(vec![j]);
                "the arguments wrapped in an array".into()
            }
        }
        9 => {
            let v = c
                .pick(&["1.5", "null", "\"main\"", "[]", "{}", "true"])
                .to_string();
            j = J::Raw(v.clone());
            format!("the whole input is {v}")
        }
        10 => {
            // Break the text itself.
            let mut t = j.text().into_bytes();
            let w = match c.below(8) {
                0 => {
                    t.truncate(c.below(t.len() + 1));
                    "truncated"
                }
                1 => {
                    t.extend_from_slice(b" trailing");
                    "trailing text"
                }
                2 => {
                    t.splice(0..0, "\u{feff}".bytes());
                    "a byte-order mark"
                }
                3 => {
                    let at = c.below(t.len() + 1);
                    t.insert(at, 0xff);
                    "an invalid UTF-8 byte"
                }
                4 => {
                    t.extend_from_slice(b" // comment");
                    "a comment"
                }
                5 => {
                    for x in t.iter_mut() {
                        if *x == b'"' {
                            *x = b'\'';
                        }
                    }
                    "single quotes"
                }
                6 => {
                    t.clear();
                    "empty"
                }
                _ => {
                    let at = c.below(t.len() + 1);
                    t.insert(at, b',');
                    "a stray comma"
                }
            };
            return (t, w.to_string());
        }
        _ => {
            // A valid input with odd numbers everywhere: fine inputs the
            // engines must agree on.
            *j.node(at) = J::Raw(c.pick(&["-0.0", "5e-324", "1e308", "0"]).to_string());
            format!("node {at} made an odd number")
        }
    };
    (j.text().into_bytes(), what)
}
