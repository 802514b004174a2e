//! The flat representation of data types (Note [Native layout] in
//! `codegen/mod.rs`): how many 8-byte slots a value of a type takes, the
//! Cranelift type of each slot, and the scalar "leaves" of a type with
//! their byte offsets. Functions have no layout: the normal form has none
//! left, and meeting one is [`CodegenError::Unsupported`].

use cranelift_codegen::ir::types;

use super::{CodegenError, unsupported};
use crate::ir::Type;

/// Bytes per slot.
pub const SLOT: i64 = 8;

/// The number of 8-byte slots a value of type `t` occupies.
pub fn slots(t: &Type) -> Result<usize, CodegenError> {
    Ok(match t {
        Type::Double | Type::Index | Type::Bool => 1,
        Type::Array(_) => 2,
        Type::Pair(a, b) => slots(a)? + slots(b)?,
        Type::Fun(..) => return Err(unsupported(format!("a function value of type {t}"))),
    })
}

/// The component at `path` (`false` for `fst`, `true` for `snd`) of a
/// value of type `ty`, if `path` goes through pairs only.
pub fn component_type<'t>(ty: &'t Type, path: &[bool]) -> Option<&'t Type> {
    let mut ty = ty;
    for &second in path {
        let Type::Pair(a, b) = ty else {
            return None;
        };
        ty = if second { b } else { a };
    }
    Some(ty)
}

/// The first slot of the component at `path` (`false` for `fst`, `true`
/// for `snd`) of a value of type `ty`.
pub fn component_slot(ty: &Type, path: &[bool]) -> Result<usize, CodegenError> {
    let mut at = 0;
    let mut ty = ty;
    for &second in path {
        let Type::Pair(a, b) = ty else {
            return Err(super::compile_error("a state path through a non-pair"));
        };
        if second {
            at += slots(a)?;
            ty = b;
        } else {
            ty = a;
        }
    }
    Ok(at)
}

/// The size in bytes of one array element of type `t`.
pub fn elem_bytes(t: &Type) -> Result<i64, CodegenError> {
    Ok(slots(t)? as i64 * SLOT)
}

/// One slot of a flattened type, with its offset in bytes from the start
/// of the value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Leaf {
    Double(i32),
    Index(i32),
    Bool(i32),
    /// An array: `ptr` at the offset, `len` one slot later; elements of
    /// the given size in bytes.
    Array(i32, i64),
}

/// The leaves of `t` in slot order, starting at byte offset `at`.
pub fn leaves(t: &Type, at: i32, out: &mut Vec<Leaf>) -> Result<(), CodegenError> {
    match t {
        Type::Double => out.push(Leaf::Double(at)),
        Type::Index => out.push(Leaf::Index(at)),
        Type::Bool => out.push(Leaf::Bool(at)),
        Type::Array(e) => out.push(Leaf::Array(at, elem_bytes(e)?)),
        Type::Pair(a, b) => {
            leaves(a, at, out)?;
            let off = at + (slots(a)? as i64 * SLOT) as i32;
            leaves(b, off, out)?;
        }
        Type::Fun(..) => return Err(unsupported(format!("a function value of type {t}"))),
    }
    Ok(())
}

/// The Cranelift types of the slots of `t`, in order (an array is its
/// pointer and its length, both `i64`).
pub fn clif_types(t: &Type) -> Result<Vec<types::Type>, CodegenError> {
    let mut ls = Vec::new();
    leaves(t, 0, &mut ls)?;
    let mut out = Vec::with_capacity(ls.len());
    for l in ls {
        match l {
            Leaf::Double(_) => out.push(types::F64),
            Leaf::Index(_) => out.push(types::I64),
            Leaf::Bool(_) => out.push(types::I8),
            Leaf::Array(..) => out.extend([types::I64, types::I64]),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_flatten_and_arrays_take_two_slots() {
        let t = Type::pair(
            Type::Double,
            Type::pair(Type::array(Type::Bool), Type::Index),
        );
        assert_eq!(slots(&t).unwrap(), 4);
        let mut ls = Vec::new();
        leaves(&t, 0, &mut ls).unwrap();
        assert_eq!(
            ls,
            vec![Leaf::Double(0), Leaf::Array(8, 8), Leaf::Index(24)]
        );
        assert_eq!(
            clif_types(&t).unwrap(),
            vec![types::F64, types::I64, types::I64, types::I64]
        );
    }
}
