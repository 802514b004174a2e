//! The command line's JSON output, written with `serde_json` in one
//! layout: `{"key": value, "other": [1.0, 2.0]}` (a space after every
//! `:` and `,`), Doubles as the evaluator prints them (always with a
//! decimal point or an exponent; non-finite ones as the strings `"NaN"`,
//! `"Infinity"`, `"-Infinity"`, see `eval::Value`'s serialisation).

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};

/// `serde_json`'s compact layout with spaces after separators, and
/// Doubles in Rust's shortest round-trip form (`1.0`, `1e-7`).
struct Layout;

impl Formatter for Layout {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, x: f64) -> io::Result<()> {
        write!(w, "{x:?}")
    }
}

/// `value` as one line of JSON in the command line's layout (with no
/// newline).
pub fn to_line(value: &impl Serialize) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    value.serialize(&mut Serializer::with_formatter(&mut out, Layout))?;
    // The serializer writes UTF-8 only.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `x` rounded to `digits` decimals, for times printed to a sensible
/// precision (n / 10^d prints as that decimal).
pub fn rounded(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// Doubles serialised as `eval::Value` serialises them (non-finite ones
/// as strings), without building values.
pub struct Doubles<'a>(pub &'a [f64]);

impl Serialize for Doubles<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for &x in self.0 {
            seq.serialize_element(&crate::eval::Value::Double(x))?;
        }
        seq.end()
    }
}
