//! `log` and `exp` in `f64x2` lanes for code under the relaxed
//! floating-point contract (Note [Lane sums] in `lane_sums.rs`;
//! spec/semantics.md §7). The methods and coefficients are fdlibm's
//! (Sun Microsystems, 1993; "permission to use, copy, modify, and
//! distribute this software is freely granted"), without branches.
//!
//! `log`, fdlibm's `e_log.c`:
//!
//! - x = 2^k (1 + f) with 1 + f in [√2/2, √2), by integer arithmetic on
//!   the bits (the exponent of x + (1 − √2/2) · 2^e is k);
//! - s = f / (2 + f), so log(1 + f) = 2s + s·R(s²) with R fdlibm's
//!   degree-14 even polynomial (its error under 2^-58.45 on [0, 0.1716]);
//! - log x = s·(f²/2 + R) + k·ln2_lo − f²/2 + f + k·ln2_hi, with ln2 split
//!   so that k·ln2_hi is exact.
//!
//! `exp`, fdlibm's `e_exp.c`:
//!
//! - x = k ln2 + r with k = x/ln2 rounded to nearest (by adding and
//!   subtracting 1.5 · 2^52) and |r| ≤ ln2/2 + ε, as hi − lo with
//!   hi = x − k·ln2_hi (exact) and lo = k·ln2_lo;
//! - c = r − r²·P(r²), P fdlibm's degree-4 polynomial (its error under
//!   2^-59), and exp r = 1 − ((lo − r·c/(2 − c)) − hi);
//! - exp x = 2^k exp r, 2^k made from k's bits.
//!
//! fdlibm states an error under 1 ulp for both. The lanes hold it where
//! the reduction does: for `log`, x normal, positive and finite; for
//! `exp`, |x| ≤ 708, where 2^k and the result are normal. Every other x
//! (for `log` zero, negative, subnormal, infinite or NaN; for `exp`
//! larger or NaN) is reported by the function's test, and the caller then
//! runs the code as written (the evaluator's function and its ⊥). The
//! tests measure the distance to the evaluator's functions
//! (`tests/it/native/lane_sums.rs`).
//!
//! # Note [Lane constants]
//!
//! `log` uses nineteen constants. Written as `splat`s of literals,
//! Cranelift hoists every one out of the loop of pairs, where more are
//! then live than x86-64 has vector registers: the register allocator
//! spilled them, reloaded each in every trip and stored a dozen back on
//! the loop's back edge (NNMF's objective, 10⁶ `log`s and divisions: 105
//! instructions per pair, 4.45 ms). Instead the module holds one
//! read-only table, [`LANE_CONSTANTS`], each constant in both lanes of a
//! 16-byte entry (`backend::module::define_lane_constants`), and a
//! constant of `log` is a load of its entry. The load is pure (it may
//! trap on nothing and reads memory nothing writes), so Cranelift places
//! it where it is first used; and its address depends on the pair's
//! index `k` — the table's plus `(k >> 63) << 4`, zero as `k ≥ 0` — so it
//! is not hoisted out of the loop. Each constant then lives from its load
//! to its use: no spill (85 instructions per pair, 4.17 ms). Outside a
//! pair (no index to depend on) and in a function without the table, a
//! constant is a `splat` of its literal. `exp`'s twelve stay `splat`s:
//! they fit in registers beside a sum's, and loaded they made GMM's
//! sums of `exp`s 4% slower (d2_K200, `--fp relaxed`).
//!
//! # Note [Fused polynomials]
//!
//! On a host with fused multiply–add (x86-64's FMA3,
//! `backend::module::host_fma`), `a·b + c` in these methods — each
//! Horner step, `log`'s `z·t₂ + t₁`, `s·(hfsq + R) + k·ln2_lo` and
//! `k·ln2_hi + a`, `exp`'s `r − t·P` — is one `fma`, rounded once. That
//! shortens the chain of dependent operations each lane waits on and the
//! instructions per pair: NNMF's objective, 10⁶ `log`s, went from 3.94
//! to 3.50 ms (`--fp relaxed`, best of 3 alternating rounds). `k·ln2_hi`
//! is exact (ln2_hi has 11 trailing zero bits and |k| ≤ 1075), so fused
//! or not it gives the same bits; the others round once instead of
//! twice, and the error stays within the 2 ulp of the evaluator's that
//! `tests/it/native/lane_sums.rs` checks.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::Lower;

/// fdlibm's `Lg1` … `Lg7`, by their bits.
pub(crate) const LG: [u64; 7] = [
    0x3FE5_5555_5555_5593,
    0x3FD9_9999_9997_FA04,
    0x3FD2_4924_9422_9359,
    0x3FCC_71C5_1D8E_78AF,
    0x3FC7_4664_96CB_03DE,
    0x3FC3_9A09_D078_C69F,
    0x3FC2_F112_DF3E_5244,
];
/// ln 2 = LN2_HI + LN2_LO, with 11 trailing zero bits in LN2_HI.
pub(crate) const LN2_HI: u64 = 0x3FE6_2E42_FEE0_0000;
pub(crate) const LN2_LO: u64 = 0x3DEA_39EF_3579_3C76;
/// The high word of √2/2's bits: the reduction's pivot.
pub(crate) const PIVOT: u64 = 0x3FE6_A09E_0000_0000;
/// 2^52 as a Double's bits: an exponent field e ≤ 2047 or'ed into its
/// mantissa reads as 2^52 + e.
pub(crate) const TWO52: u64 = 0x4330_0000_0000_0000;
/// fdlibm's `P1` … `P5` of `exp`, by their bits.
pub(crate) const P: [u64; 5] = [
    0x3FC5_5555_5555_553E,
    0xBF66_C16C_16BE_BD93,
    0x3F11_566A_AF25_DE2C,
    0xBEBB_BD41_C5D2_6BF1,
    0x3E66_3769_72BE_A4D0,
];
/// 1 / ln 2.
pub(crate) const INV_LN2: u64 = 0x3FF7_1547_652B_82FE;
/// 1.5 · 2^52: added to a Double of magnitude under 2^51, it rounds it to
/// an integer k, held in the low bits of the sum's mantissa.
pub(crate) const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// The largest |x| whose `exp` the lanes compute: k ≤ 1021, so 2^k and
/// the result are normal.
pub(crate) const EXP_LIMIT: f64 = 708.0;
/// The smallest normal positive Double.
pub(crate) const MIN_NORMAL: f64 = f64::MIN_POSITIVE;

/// Every constant of [`Lower::vlog`], by its bits (Note [Lane
/// constants]): the module's table holds each in both lanes of a 16-byte
/// entry, in this order.
pub const LANE_CONSTANTS: [u64; 19] = [
    MIN_NORMAL.to_bits(),
    f64::INFINITY.to_bits(),
    0x3FF0_0000_0000_0000 - PIVOT,
    TWO52,
    (f64::from_bits(TWO52) + 1023.0).to_bits(),
    (1 << 52) - 1,
    PIVOT,
    1.0f64.to_bits(),
    0.5f64.to_bits(),
    2.0f64.to_bits(),
    LG[0],
    LG[1],
    LG[2],
    LG[3],
    LG[4],
    LG[5],
    LG[6],
    LN2_LO,
    LN2_HI,
];

impl Lower<'_, '_> {
    /// `log` of both lanes of `x`, and an `i8` that is non-zero when
    /// either lane is outside the normal positive finite Doubles, where
    /// the lanes are not the logarithm and the caller must run the scalar
    /// code instead.
    pub(super) fn vlog(&mut self, x: Value) -> (Value, Value) {
        let f64x2 = types::F64X2;
        let i64x2 = types::I64X2;
        let bits = MemFlagsData::new();
        let lo = self.table_f64(MIN_NORMAL);
        let hi = self.table_f64(f64::INFINITY);
        // Outside [MIN_NORMAL, ∞) or NaN: either lane's sign bit of the
        // two unordered-or comparisons (movmskpd).
        let small = self.b.ins().fcmp(FloatCC::UnorderedOrLessThan, x, lo);
        let large = self
            .b
            .ins()
            .fcmp(FloatCC::UnorderedOrGreaterThanOrEqual, x, hi);
        let outside = self.b.ins().bor(small, large);
        let signs = self.b.ins().vhigh_bits(types::I8, outside);
        let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, signs, 0);
        // The reduction: u = bits(x) + (1.0's high word − the pivot's)
        // carries into the exponent exactly when x's mantissa is at least
        // √2/2's, so u's exponent field is k + 1023, and the mantissa
        // with the pivot's exponent is 1 + f.
        let xi = self.b.ins().bitcast(i64x2, bits, x);
        let shift = self.table_i64(0x3FF0_0000_0000_0000 - PIVOT);
        let u = self.b.ins().iadd(xi, shift);
        let sh = self.b.ins().iconst(types::I32, 52);
        let e = self.b.ins().ushr(u, sh);
        let two52 = self.table_i64(TWO52);
        let e = self.b.ins().bor(e, two52);
        let e = self.b.ins().bitcast(f64x2, bits, e);
        let bias = self.table_f64(f64::from_bits(TWO52) + 1023.0);
        let k = self.b.ins().fsub(e, bias);
        let mant = self.table_i64((1 << 52) - 1);
        let m = self.b.ins().band(u, mant);
        let pivot = self.table_i64(PIVOT);
        let m = self.b.ins().iadd(m, pivot);
        let m = self.b.ins().bitcast(f64x2, bits, m);
        let one = self.table_f64(1.0);
        let f = self.b.ins().fsub(m, one);
        // hfsq = 0.5·f·f; s = f / (2 + f); z = s²; w = z².
        let half = self.table_f64(0.5);
        let hf = self.b.ins().fmul(half, f);
        let hfsq = self.b.ins().fmul(hf, f);
        let two = self.table_f64(2.0);
        let d = self.b.ins().fadd(two, f);
        let s = self.b.ins().fdiv(f, d);
        let z = self.b.ins().fmul(s, s);
        let w = self.b.ins().fmul(z, z);
        // t1 = w (Lg2 + w (Lg4 + w Lg6)); t2 = z (Lg1 + w (Lg3 + w (Lg5
        // + w Lg7))).
        let t1 = self.horner(true, w, &[LG[1], LG[3], LG[5]]);
        let t1 = self.b.ins().fmul(w, t1);
        let t2 = self.horner(true, w, &[LG[0], LG[2], LG[4], LG[6]]);
        let r = self.mul_add(z, t2, t1);
        // s (hfsq + R) + k ln2_lo − hfsq + f + k ln2_hi, left to right.
        let a = self.b.ins().fadd(hfsq, r);
        let ln2_lo = self.table_f64(f64::from_bits(LN2_LO));
        let klo = self.b.ins().fmul(k, ln2_lo);
        let a = self.mul_add(s, a, klo);
        let a = self.b.ins().fsub(a, hfsq);
        let a = self.b.ins().fadd(a, f);
        // k ln2_hi is exact (|k| < 2^11), so fused or not the same bits.
        let ln2_hi = self.table_f64(f64::from_bits(LN2_HI));
        let y = self.mul_add(k, ln2_hi, a);
        (y, bad)
    }

    /// `exp` of both lanes of `x`, and an `i8` that is non-zero when
    /// either lane is NaN or of magnitude over 708, where the lanes are
    /// not the exponential and the caller must run the scalar code
    /// instead.
    pub(super) fn vexp(&mut self, x: Value) -> (Value, Value) {
        let f64x2 = types::F64X2;
        let i64x2 = types::I64X2;
        let bits = MemFlagsData::new();
        let hi_lim = self.splat_f64(EXP_LIMIT);
        let lo_lim = self.splat_f64(-EXP_LIMIT);
        let below = self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, hi_lim);
        let above = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, lo_lim);
        let inside = self.b.ins().band(below, above);
        let all = self.b.ins().vall_true(inside);
        let bad = self.b.ins().bxor_imm_u(all, 1);
        // k = x / ln2 rounded to nearest, in the low bits of kd.
        let inv_ln2 = self.splat_f64(f64::from_bits(INV_LN2));
        let shifter = self.splat_f64(SHIFTER);
        let xk = self.b.ins().fmul(x, inv_ln2);
        let kd = self.b.ins().fadd(xk, shifter);
        let k = self.b.ins().fsub(kd, shifter);
        // r = hi − lo.
        let ln2_hi = self.splat_f64(f64::from_bits(LN2_HI));
        let ln2_lo = self.splat_f64(f64::from_bits(LN2_LO));
        let khi = self.b.ins().fmul(k, ln2_hi);
        let hi = self.b.ins().fsub(x, khi);
        let lo = self.b.ins().fmul(k, ln2_lo);
        let r = self.b.ins().fsub(hi, lo);
        // c = r − t (P1 + t (P2 + … + t P5)), t = r².
        let t = self.b.ins().fmul(r, r);
        let p = self.horner(false, t, &P);
        let nt = self.b.ins().fneg(t);
        let c = self.mul_add(nt, p, r);
        // y = 1 − ((lo − r c / (2 − c)) − hi).
        let rc = self.b.ins().fmul(r, c);
        let two = self.splat_f64(2.0);
        let d = self.b.ins().fsub(two, c);
        let q = self.b.ins().fdiv(rc, d);
        let a = self.b.ins().fsub(lo, q);
        let a = self.b.ins().fsub(a, hi);
        let one = self.splat_f64(1.0);
        let y = self.b.ins().fsub(one, a);
        // 2^k: k + 1023 into the exponent field (kd's bits are 1.5 · 2^52's
        // plus k, whose low 12 bits are zero).
        let kb = self.b.ins().bitcast(i64x2, bits, kd);
        let bias = self.splat_i64(1023);
        let e = self.b.ins().iadd(kb, bias);
        let sh = self.b.ins().iconst(types::I32, 52);
        let e = self.b.ins().ishl(e, sh);
        let scale = self.b.ins().bitcast(f64x2, bits, e);
        (self.b.ins().fmul(y, scale), bad)
    }

    /// c₀ + w (c₁ + w (c₂ + …)) in lanes, the coefficients by their bits.
    /// With `table`, the coefficients from the table of lane constants
    /// (Note [Lane constants]).
    fn horner(&mut self, table: bool, w: Value, cs: &[u64]) -> Value {
        let constant = |l: &mut Self, c: u64| {
            let c = f64::from_bits(c);
            if table {
                l.table_f64(c)
            } else {
                l.splat_f64(c)
            }
        };
        let (last, rest) = cs.split_last().expect("a polynomial has a coefficient");
        let mut p = constant(self, *last);
        for c in rest.iter().rev() {
            let c = constant(self, *c);
            p = self.mul_add(w, p, c);
        }
        p
    }

    /// a·b + c: one fused multiply–add on a host with FMA3 (Note [Fused
    /// polynomials]), else a product and a sum, each rounded.
    fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.fma {
            self.b.ins().fma(a, b, c)
        } else {
            let t = self.b.ins().fmul(a, b);
            self.b.ins().fadd(t, c)
        }
    }

    fn splat_f64(&mut self, x: f64) -> Value {
        let c = self.b.ins().f64const(x);
        self.b.ins().splat(types::F64X2, c)
    }

    fn splat_i64(&mut self, x: u64) -> Value {
        let c = self.b.ins().iconst(types::I64, x as i64);
        self.b.ins().splat(types::I64X2, c)
    }

    /// `x` in both lanes from the table of lane constants (Note [Lane
    /// constants]), or a `splat` where there is none.
    fn table_f64(&mut self, x: f64) -> Value {
        self.lane_constant(x.to_bits(), types::F64X2)
            .unwrap_or_else(|l| l.splat_f64(x))
    }

    fn table_i64(&mut self, x: u64) -> Value {
        self.lane_constant(x, types::I64X2)
            .unwrap_or_else(|l| l.splat_i64(x))
    }

    /// `bits` in both lanes of a `ty`, loaded from the module's table
    /// where it is used (Note [Lane constants]); `Err(self)` when the
    /// function has no table or no pair index to make the load depend on.
    fn lane_constant(&mut self, bits: u64, ty: types::Type) -> Result<Value, &mut Self> {
        let (Some(table), Some(k)) = (self.imports.lane_constants(), self.lane_index) else {
            return Err(self);
        };
        let Some(at) = LANE_CONSTANTS.iter().position(|&c| c == bits) else {
            debug_assert!(false, "{bits:#x} is not in LANE_CONSTANTS");
            return Err(self);
        };
        // k ≥ 0, so k >> 63 is 0: the table's address, as the pair's.
        let zero = self.b.ins().ushr_imm_u(k, 63);
        let zero = self.b.ins().ishl_imm_u(zero, 4);
        let base = self.b.ins().symbol_value(types::I64, table);
        let base = self.b.ins().iadd(base, zero);
        let offset = i32::try_from(16 * at).expect("a small table");
        let flags = MemFlagsData::trusted().with_readonly().with_can_move();
        Ok(self.b.ins().load(ty, flags, base, offset))
    }
}
