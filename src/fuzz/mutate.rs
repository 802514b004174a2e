//! Mutation of seed files (examples, golden files, rule files) into
//! malformed and near-valid inputs: byte flips, insertions and
//! deletions, truncation, token deletion, duplication, swaps and
//! replacements, line edits (which break the offside rule), splices from
//! other seeds, deep nesting, huge literals, invalid UTF-8 and other
//! odd characters, and now and then a file of 13 MB. The output is bytes:
//! invalid UTF-8 is part of the input space (the command line rejects it
//! with `invalid-utf8` and a location).
//!
//! Tokens here are a rough, language-neutral split (words, single
//! punctuation characters, whitespace runs), good for both program and
//! rule files; the real lexer is what is under test.

use super::choices::Choices;

/// What a seed is, for the vocabulary of token replacements.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Program,
    Rules,
}

const PROGRAM_WORDS: &[&str] = &[
    "let", "in", "fun", "if", "then", "else", "true", "false", "->", "=", "(", ")", "[", "]", ".[",
    ",", ":", "+", "-", "*", "/", "**", "<", ">", "<=", ">=", "==", "<>", "!=", "&&", "||", "×",
    "(*", "*)", "//", "(*)", "( ** )", "build", "ifold", "get", "length", "fst", "snd", "pair",
    "deriv", "diff", "grad", "jacob", "vdiff", "mdiff", "mgrad", "sin", "log", "sqrt", "toDouble",
    "not", "Double", "Index", "Bool", "Vector", "Matrix", "Array<", "DoubleD", "main", "x", "0",
    "1", "2.5", "-1", "1e3", "\n", "\n  ", "\t",
];

const RULE_WORDS: &[&str] = &[
    "rule",
    "##",
    "#",
    ":",
    "=>",
    "if",
    "tags:",
    "refines",
    "ieee-inexact",
    "expands",
    "phase=normalise",
    "phase=simplify",
    "?a",
    "?b",
    "?x",
    "?f",
    "?n",
    "?i",
    "(",
    ")",
    "+",
    "-",
    "*",
    "/",
    "get",
    "build",
    "lam",
    "var",
    "let",
    "app",
    "ifold",
    "fst",
    "snd",
    "pair",
    "if",
    "neg",
    "0",
    "1",
    "0.0",
    "1.0",
    "true",
    "not-free",
    "distinct",
    "const",
    "nonzero",
    "in-bounds",
    "fresh",
    "free-in",
    "total",
    "double",
    "index",
    "only-fst",
    "\n",
    "\n  ",
];

const HUGE_NUMBERS: &[&str] = &[
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "1e309",
    "-1e309",
    "1e-400",
    "4.9e-324",
    "1.7976931348623157e308",
    "99999999999999999999.5",
    "4294967296",
    "1000000",
    "12345678901234567890e-10",
    "0.0000000000000000000000000000000000001",
];

const ODD_BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xc0\xaf",
    b"\x00",
    "é".as_bytes(),
    "×".as_bytes(),
    "λ".as_bytes(),
    "\u{feff}".as_bytes(),
    "\u{2028}".as_bytes(),
    "😀".as_bytes(),
    b"\r",
    b"\r\n",
    b"\t",
    b"\x7f",
    b"\x1b[0m",
];

/// The size a file is grown to by the "huge file" mutation.
pub const HUGE_FILE: usize = 13 << 20;

/// Applies one to a few mutations to `seed`; `others` are seeds to
/// splice from. `huge` allows the 13 MB file mutation. Returns the bytes
/// and a description of what was done.
pub fn mutate(
    c: &mut Choices,
    seed: &[u8],
    others: &[&[u8]],
    kind: Kind,
    huge: bool,
) -> (Vec<u8>, String) {
    let mut bytes = seed.to_vec();
    let mut what = Vec::new();
    let n = 1 + c.geometric(5);
    for _ in 0..n {
        what.push(mutate_once(c, &mut bytes, others, kind, huge));
    }
    (bytes, what.join("; "))
}

/// A rough token split: (start, end) byte ranges of words, single
/// punctuation characters and whitespace runs.
fn tokens(b: &[u8]) -> Vec<(usize, usize)> {
    let word =
        |x: u8| x.is_ascii_alphanumeric() || x == b'_' || x == b'\'' || x == b'?' || x >= 0x80;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let s = i;
        if word(b[i]) {
            while i < b.len()
                && (word(b[i]) || (b[i] == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit()))
            {
                i += 1;
            }
        } else if b[i].is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
        } else {
            i += 1;
        }
        out.push((s, i));
    }
    out
}

/// Non-whitespace tokens.
fn solid(b: &[u8]) -> Vec<(usize, usize)> {
    tokens(b)
        .into_iter()
        .filter(|(s, _)| !b[*s].is_ascii_whitespace())
        .collect()
}

/// Byte ranges of lines (without their newline).
fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = 0;
    for (i, x) in b.iter().enumerate() {
        if *x == b'\n' {
            out.push((s, i));
            s = i + 1;
        }
    }
    if s < b.len() {
        out.push((s, b.len()));
    }
    out
}

fn mutate_once(
    c: &mut Choices,
    b: &mut Vec<u8>,
    others: &[&[u8]],
    kind: Kind,
    huge: bool,
) -> String {
    let len = b.len();
    match c.weighted(&[4, 3, 3, 1, 4, 3, 3, 4, 4, 2, 1, 2, 2, 1]) {
        0 if len > 0 => {
            let (at, bit) = (c.below(len), c.below(8));
            b[at] ^= 1 << bit;
            format!("flip bit {bit} of byte {at}")
        }
        1 => {
            let at = c.below(len + 1);
            let x = *c.pick(b"()[]\n \t\"*/-.e?=>`:,;\\{}");
            b.insert(at, x);
            format!("insert {:?} at {at}", x as char)
        }
        2 if len > 0 => {
            let at = c.below(len);
            let k = 1 + c.below(8.min(len - at));
            b.drain(at..at + k);
            format!("delete {k} bytes at {at}")
        }
        3 => {
            let at = c.below(len + 1);
            b.truncate(at);
            format!("truncate at {at}")
        }
        4 => {
            let ts = solid(b);
            if ts.is_empty() {
                return "no token to delete".into();
            }
            let (s, e) = ts[c.below(ts.len())];
            let tok = String::from_utf8_lossy(&b[s..e]).into_owned();
            b.drain(s..e);
            format!("delete token {tok:?} at {s}")
        }
        5 => {
            let ts = solid(b);
            if ts.is_empty() {
                return "no token to duplicate".into();
            }
            let (s, e) = ts[c.below(ts.len())];
            let tok = b[s..e].to_vec();
            let sep: &[u8] = if c.one_in(2) { b" " } else { b"" };
            let mut ins = sep.to_vec();
            ins.extend_from_slice(&tok);
            b.splice(e..e, ins);
            format!("duplicate token {:?} at {s}", String::from_utf8_lossy(&tok))
        }
        6 => {
            let ts = solid(b);
            if ts.len() < 2 {
                return "no tokens to swap".into();
            }
            let (i, j) = (c.below(ts.len()), c.below(ts.len()));
            let (i, j) = (i.min(j), i.max(j));
            if i == j {
                return "swap a token with itself".into();
            }
            let ((s1, e1), (s2, e2)) = (ts[i], ts[j]);
            let (t1, t2) = (b[s1..e1].to_vec(), b[s2..e2].to_vec());
            b.splice(s2..e2, t1);
            b.splice(s1..e1, t2);
            format!("swap tokens at {s1} and {s2}")
        }
        7 => {
            let ts = solid(b);
            if ts.is_empty() {
                return "no token to replace".into();
            }
            let (s, e) = ts[c.below(ts.len())];
            let new: Vec<u8> = if c.one_in(3) {
                let (s2, e2) = ts[c.below(ts.len())];
                b[s2..e2].to_vec()
            } else {
                let words = match kind {
                    Kind::Program => PROGRAM_WORDS,
                    Kind::Rules => RULE_WORDS,
                };
                c.pick(words).as_bytes().to_vec()
            };
            let desc = format!(
                "replace token {:?} at {s} by {:?}",
                String::from_utf8_lossy(&b[s..e]),
                String::from_utf8_lossy(&new)
            );
            b.splice(s..e, new);
            desc
        }
        8 => {
            let ls = lines(b);
            if ls.is_empty() {
                return "no line to edit".into();
            }
            let k = c.below(ls.len());
            let (s, e) = ls[k];
            match c.below(5) {
                0 => {
                    b.drain(s..(e + 1).min(b.len()));
                    format!("delete line {}", k + 1)
                }
                1 => {
                    let mut l = b[s..e].to_vec();
                    l.push(b'\n');
                    b.splice(s..s, l);
                    format!("duplicate line {}", k + 1)
                }
                2 => {
                    let j = c.below(ls.len());
                    let (s2, e2) = ls[j];
                    let (a, bb) = (b[s..e].to_vec(), b[s2..e2].to_vec());
                    if j > k {
                        b.splice(s2..e2, a);
                        b.splice(s..e, bb);
                    } else if j < k {
                        b.splice(s..e, bb);
                        b.splice(s2..e2, a);
                    }
                    format!("swap lines {} and {}", k + 1, j + 1)
                }
                3 => {
                    let n = c.range(1, 4);
                    b.splice(s..s, std::iter::repeat_n(b' ', n));
                    format!("indent line {} by {n}", k + 1)
                }
                _ => {
                    let spaces = b[s..e].iter().take_while(|x| **x == b' ').count();
                    let n = c.range(1, 4).min(spaces);
                    b.drain(s..s + n);
                    format!("dedent line {} by {n}", k + 1)
                }
            }
        }
        9 if !others.is_empty() => {
            let o = others[c.below(others.len())];
            let ol = lines(o);
            if ol.is_empty() {
                return "nothing to splice".into();
            }
            let i = c.below(ol.len());
            let j = (i + c.range(1, 6)).min(ol.len());
            let chunk_start = ol[i].0;
            let chunk_end = (ol[j - 1].1 + 1).min(o.len());
            let chunk = o[chunk_start..chunk_end].to_vec();
            let ls = lines(b);
            let at = if ls.is_empty() {
                0
            } else {
                ls[c.below(ls.len())].0
            };
            b.splice(at..at, chunk);
            format!("splice {} lines of another seed at {at}", j - i)
        }
        10 => {
            // Deep nesting around a token.
            let ts = solid(b);
            let (s, e) = if ts.is_empty() {
                (0, 0)
            } else {
                ts[c.below(ts.len())]
            };
            // Programs: around the parser's limit (10,000) and past it.
            // Rule files have no such limit: their loader is linear, but
            // in the debug build about 100 times slower than in the
            // release build, so the very deep ones are rare.
            let n = match (kind, c.below(3)) {
                (_, 0) => c.range(50, 500),
                (Kind::Program, 1) => c.range(5_000, 10_050),
                (Kind::Program, _) => c.range(10_000, 100_000),
                (Kind::Rules, _) if c.one_in(20) => c.range(10_000, 100_000),
                (Kind::Rules, _) => c.range(500, 3_000),
            };
            let (open, close): (&[u8], &[u8]) = match (kind, c.below(4)) {
                (_, 0) => (b"(", b")"),
                (Kind::Program, 1) => (b"[", b"]"),
                (Kind::Program, 2) => (b"-", b""),
                (Kind::Program, _) => (b"sin (", b")"),
                (Kind::Rules, 1) => (b"(neg ", b")"),
                (Kind::Rules, _) => (b"(+ 1 ", b")"),
            };
            let mut ins = open.repeat(n);
            ins.extend_from_slice(&b[s..e]);
            ins.extend_from_slice(&close.repeat(n));
            b.splice(s..e, ins);
            format!(
                "nest the token at {s} {n} deep in {:?}",
                String::from_utf8_lossy(open)
            )
        }
        11 => {
            // A huge literal in place of a number (or any token).
            let ts = solid(b);
            let nums: Vec<(usize, usize)> = ts
                .iter()
                .copied()
                .filter(|(s, _)| b[*s].is_ascii_digit())
                .collect();
            let pool = if nums.is_empty() { &ts } else { &nums };
            let (s, e) = if pool.is_empty() {
                (0, 0)
            } else {
                pool[c.below(pool.len())]
            };
            let lit: Vec<u8> = match c.below(4) {
                0 => format!("1{}", "0".repeat(c.range(20, 100_000))).into_bytes(),
                1 => format!("0.{}1", "0".repeat(c.range(20, 100_000))).into_bytes(),
                _ => c.pick(HUGE_NUMBERS).as_bytes().to_vec(),
            };
            let desc = format!(
                "replace {:?} at {s} by a literal of {} characters",
                String::from_utf8_lossy(&b[s..e]),
                lit.len()
            );
            b.splice(s..e, lit);
            desc
        }
        12 => {
            let at = if c.one_in(5) { 0 } else { c.below(len + 1) };
            let odd = *c.pick(ODD_BYTES);
            b.splice(at..at, odd.iter().copied());
            format!("insert bytes {odd:?} at {at}")
        }
        13 if huge && len > 0 => {
            let copies = HUGE_FILE / len + 1;
            let unit = b.clone();
            b.reserve(unit.len() * copies);
            for _ in 0..copies {
                b.push(b'\n');
                b.extend_from_slice(&unit);
            }
            format!("repeat the file to {} bytes", b.len())
        }
        _ => {
            // CRLF line ends throughout.
            let crlf: Vec<u8> = b
                .iter()
                .flat_map(|x| {
                    if *x == b'\n' {
                        vec![b'\r', b'\n']
                    } else {
                        vec![*x]
                    }
                })
                .collect();
            *b = crlf;
            "CRLF line ends".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_input() {
        let b = b"let main = fun (x: Double) -> x * 2.5\n";
        let ts = tokens(b);
        assert_eq!(ts.first().map(|t| t.0), Some(0));
        assert_eq!(ts.last().map(|t| t.1), Some(b.len()));
        assert!(ts.windows(2).all(|w| w[0].1 == w[1].0));
        assert!(solid(b).iter().any(|(s, e)| &b[*s..*e] == b"2.5"));
    }

    #[test]
    fn mutation_is_deterministic() {
        let seed = b"let main = fun (v: Vector) -> vectorSum v\n";
        let choices: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let a = mutate(&mut Choices::new(&choices), seed, &[], Kind::Program, false);
        let b = mutate(&mut Choices::new(&choices), seed, &[], Kind::Program, false);
        assert_eq!(a, b);
    }
}
