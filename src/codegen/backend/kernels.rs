//! Kernels that JIT code calls for loops Cranelift's 128-bit vectors run
//! at half the machine's width (Note [Row kernels]).
//!
//! # Note [Row kernels]
//!
//! Cranelift 0.135 lowers vectors of at most 128 bits on x86-64, so an
//! interchanged sum of products (Note [Interchange], blocks) runs two
//! Doubles per `mulpd` and `addpd`: at most four products and four sums
//! a cycle on this machine's two multiply and two add pipes, which the
//! batched GMM's triangular products reach (`benches/README.md`). With
//! 256-bit registers the same pipes do eight of each. So on a host with
//! AVX2 and FMA3, under the relaxed contract (spec/semantics.md §7,
//! change 3) with fused multiply–adds and under the strict one exactly
//! (below, Strict), the JIT lowers an interchanged `build`
//! of sums whose every term is `c_i · r_i[j]` — a Double `c_i` and a row
//! `r_i` that do not depend on the element `j` — to calls of
//! [`fsmooth_row_sums`] (`Lower::row_sums` in
//! `codegen/lower/loop_interchange.rs`): the lowering writes up to
//! `abi::ROW_TERMS` pairs `(c_i, r_i)` at a time, i ascending, into a buffer
//! on its stack, and the kernel adds them to every element.
//!
//! Each element adds the same terms in the same order as the evaluator,
//! each as one `fma(c_i, r_i[j], x_j)`: the product is not rounded
//! before it is added (the bound of §7 counts one more u per addend).
//! The kernel runs sixteen elements at a time in four `ymm` registers
//! over all the buffer's terms, then four at a time, then one at a time
//! with `f64::mul_add` — the same fused operation, so the result does not
//! depend on where an element falls. Object files do not call it: they
//! need only libc and libm, and keep the lanes.
//!
//! ## Strict
//!
//! The strict contract keeps the evaluator's bits, and so can the same
//! kernel: each element still adds its terms in order, so a lane that
//! rounds the product and then adds it (`vmulpd`, `vaddpd`) computes
//! what the scalar code computes, four elements at a time. Under the
//! strict contract, on a host with AVX2 and FMA3, JIT code calls
//! [`fsmooth_row_sums_exact`] and [`fsmooth_row_sums2_exact`]: on this
//! machine's two multiply and two add pipes, as fast as the fused ones.
//! The tests of Note [Interchange] (`tests/it/native/interchange.rs`,
//! IEEE's special values included) check their bits against the
//! evaluator's. GMM's batched strict objective (best of 5 alternating
//! rounds against the parent commit, the same bits): d20_K5 0.273 →
//! 0.183 ms, d32_K5 0.537 → 0.331, d64_K10 3.60 → 2.08; gradients 0.961
//! → 0.808, 2.07 → 1.66, 16.9 → 13.9 ms.
//!
//! ## Pairs
//!
//! One row of the batched products, `qy[r] = Σ_{s ≤ r} Q[r][s] · ys[s]`,
//! streams r + 1 rows of 8 KB (n = 1 000 points) from the second-level
//! cache per 16 KB of sums: the kernel alone ran at half its arithmetic
//! peak. Rows r and r + 1 read the same `ys[s]`, so where Note
//! [Interchange], pairs of rows, runs two rows together and the row `r_i`
//! does not depend on the row, [`fsmooth_row_sums2`] adds their common
//! terms to both — each `ys[s]` block loaded once for sixteen products,
//! eight `ymm` sums — and each row's remaining terms go to
//! [`fsmooth_row_sums`]. The same operations in the same order: the same
//! bits as one row at a time. GMM's batched objective, `--fp relaxed`
//! (best of 3 alternating rounds against one row at a time): d32_K5
//! 0.370 → 0.309 ms, d64_K10 2.42 → 1.80 ms; gradients 1.63 → 1.41 and
//! 13.9 → 11.7 ms.
//!
//! ## Folds
//!
//! The reverse sweep of the same products is a fold of folds of `addAt`s
//! run term-major (Note [Interchanged folds]): per row r, per term s and
//! point i, `ȳs[o[s] + i] += t_i · Q[r][s]` and `Q̄[c + s] += t_i ·
//! ys[s][i]`, with `t_i = q̄y[r][i]` read from a flat array. When a nest
//! is just that (`Lower::fold_kernel` in
//! `codegen/lower/fold_interchange.rs`), the JIT writes each term's
//! `(Q[r][s], &ȳs[o[s]], ys[s], &Q̄[c + s])` into a buffer and
//! [`fsmooth_fold_rows`] runs the terms in order over all points: the
//! row of `ȳs` receives fused products, each slot once, and the sum is
//! sixteen partial sums of fused products (four `ymm`s; the last
//! `n mod 16` points in one more, in order) added in a fixed order, then
//! added to the slot — a regrouped sum under the contract's bound, as
//! Note [Interchanged folds], relaxed, regroups it in two lanes. GMM's
//! batched gradient, `--fp relaxed` (best of 3 alternating rounds):
//! d32_K5 1.43 → 1.22 ms, d64_K10 11.9 → 8.53 ms, d20_K5 0.698 →
//! 0.624 ms.

use std::sync::OnceLock;

/// One term of a row sum (`abi::ROW_TERMS`): the coefficient, and the
/// row it multiplies (at least as long as the sum's elements; the guard
/// of the nest tested it).
#[repr(C)]
pub struct RowTerm {
    pub coef: f64,
    pub row: *const f64,
}

/// One term of two rows' sums that read the same row (Note [Row
/// kernels], pairs): each row's coefficient, and the row.
#[repr(C)]
pub struct RowTerm2 {
    pub coefs: [f64; 2],
    pub row: *const f64,
}

/// `out[j] = fma(c_i, r_i[j], out[j])` for `i` in `0 .. m` in order, for
/// every `j < n` (Note [Row kernels]).
///
/// # Safety
///
/// `out` holds `n` Doubles that nothing else reads or writes during the
/// call; `terms` holds `m` terms, each row at least `n` Doubles.
pub unsafe extern "C" fn fsmooth_row_sums(out: *mut f64, n: i64, terms: *const RowTerm, m: i64) {
    // SAFETY: the caller's contract, passed on.
    unsafe { row_sums::<true>(out, n, terms, m) }
}

/// [`fsmooth_row_sums`] with each term rounded and then added,
/// `out[j] = out[j] + c_i · r_i[j]`, as the evaluator computes it (Note
/// [Row kernels], strict).
///
/// # Safety
///
/// As [`fsmooth_row_sums`].
pub unsafe extern "C" fn fsmooth_row_sums_exact(
    out: *mut f64,
    n: i64,
    terms: *const RowTerm,
    m: i64,
) {
    // SAFETY: the caller's contract, passed on.
    unsafe { row_sums::<false>(out, n, terms, m) }
}

/// [`fsmooth_row_sums`], each step fused or not.
///
/// # Safety
///
/// As [`fsmooth_row_sums`].
unsafe fn row_sums<const FUSED: bool>(out: *mut f64, n: i64, terms: *const RowTerm, m: i64) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let Some((n, terms)) = call(n, terms, m) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            return row_sums_avx2::<FUSED>(out, n, terms);
        }
        row_sums_scalar::<FUSED>(out, 0, n, terms);
    }
}

/// [`fsmooth_row_sums`] of two rows whose terms read the same rows:
/// `outs[k][j] = fma(c_{i,k}, r_i[j], outs[k][j])` for `i` in `0 .. m`
/// in order, for every `j < n` and `k` in 0, 1 (Note [Row kernels],
/// pairs): each row read once for both.
///
/// # Safety
///
/// `out0` and `out1` hold `n` Doubles each, distinct, that nothing else
/// reads or writes during the call; `terms` holds `m` terms, each row at
/// least `n` Doubles.
pub unsafe extern "C" fn fsmooth_row_sums2(
    out0: *mut f64,
    out1: *mut f64,
    n: i64,
    terms: *const RowTerm2,
    m: i64,
) {
    // SAFETY: the caller's contract, passed on.
    unsafe { row_sums2::<true>([out0, out1], n, terms, m) }
}

/// [`fsmooth_row_sums2`] with each term rounded and then added, as the
/// evaluator computes it (Note [Row kernels], strict).
///
/// # Safety
///
/// As [`fsmooth_row_sums2`].
pub unsafe extern "C" fn fsmooth_row_sums2_exact(
    out0: *mut f64,
    out1: *mut f64,
    n: i64,
    terms: *const RowTerm2,
    m: i64,
) {
    // SAFETY: the caller's contract, passed on.
    unsafe { row_sums2::<false>([out0, out1], n, terms, m) }
}

/// [`fsmooth_row_sums2`], each step fused or not.
///
/// # Safety
///
/// As [`fsmooth_row_sums2`].
unsafe fn row_sums2<const FUSED: bool>(
    outs: [*mut f64; 2],
    n: i64,
    terms: *const RowTerm2,
    m: i64,
) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let Some((n, terms)) = call(n, terms, m) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            return row_sums2_avx2::<FUSED>(outs, n, terms);
        }
        row_sums2_scalar::<FUSED>(outs, 0, n, terms);
    }
}

/// One term of an interchanged fold (Note [Row kernels], folds): the
/// coefficient `a`, the row `dest` that receives `t · a` per point, the
/// row `src` whose products with `t` are summed, and the slot the sum
/// is added to.
#[repr(C)]
pub struct FoldTerm {
    pub coef: f64,
    pub dest: *mut f64,
    pub src: *const f64,
    pub slot: *mut f64,
}

/// For each of the `m` terms in order: `dest[i] = fma(t[i], a, dest[i])`
/// for every `i < n`, and `*slot += Σ_i t[i] · src[i]` with each product
/// fused into a partial sum from −0.0 — point i into lane i mod 16 for
/// the whole sixteens, the last `n mod 16` points into one more, in
/// order — the partial sums added in a fixed order ([`fold_sum`]; Note
/// [Row kernels], folds).
///
/// # Safety
///
/// `t` holds `n` Doubles; each term's `dest` and `src` hold `n` Doubles
/// and its `slot` one; no `dest` or `slot` overlaps another term's, `t`,
/// or any `src`; nothing else touches them during the call.
pub unsafe extern "C" fn fsmooth_fold_rows(n: i64, t: *const f64, terms: *const FoldTerm, m: i64) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let Some((n, terms)) = call(n, terms, m) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            return fold_rows_avx2(n, t, terms);
        }
        for term in terms {
            let (lanes, tail) = fold_row_scalar((0, n), t, term, [-0.0; 16]);
            *term.slot += fold_sum(&lanes, tail);
        }
    }
}

/// The partial sums of a term in their fixed order: lane l and l + 4,
/// l + 8 and l + 12 pairwise, as four `ymm` sums added (0 + 1) + (2 + 3),
/// then those four lanes (0 + 1) + (2 + 3), then the tail.
#[inline(always)]
fn fold_sum(lanes: &[f64; 16], tail: f64) -> f64 {
    let v: [f64; 4] =
        std::array::from_fn(|k| (lanes[k] + lanes[4 + k]) + (lanes[8 + k] + lanes[12 + k]));
    ((v[0] + v[1]) + (v[2] + v[3])) + tail
}

/// Points `from .. n` of one term, one at a time: those of whole
/// sixteens into `lanes` (point i into lane i mod 16), the rest into the
/// tail's partial sum, in order.
///
/// # Safety
///
/// As [`fsmooth_fold_rows`].
#[inline(always)]
unsafe fn fold_row_scalar(
    (from, n): (usize, usize),
    t: *const f64,
    term: &FoldTerm,
    mut lanes: [f64; 16],
) -> ([f64; 16], f64) {
    let whole = n - n % 16;
    let mut tail = -0.0f64;
    for i in from..n {
        // SAFETY: i < n, the length of `t`, `dest` and `src`.
        unsafe {
            let ti = *t.add(i);
            *term.dest.add(i) = ti.mul_add(term.coef, *term.dest.add(i));
            let p = ti.mul_add(
                *term.src.add(i),
                if i < whole { lanes[i % 16] } else { tail },
            );
            if i < whole {
                lanes[i % 16] = p;
            } else {
                tail = p;
            }
        }
    }
    (lanes, tail)
}

/// Every term: its whole sixteens of points in four `ymm` sums, the rest
/// as [`fold_row_scalar`] (here with FMA3's instruction for `mul_add`).
///
/// # Safety
///
/// As [`fsmooth_fold_rows`], on a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fold_rows_avx2(n: usize, t: *const f64, terms: &[FoldTerm]) {
    for term in terms {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            let (lanes, from) = fold_row_avx2(n, t, term);
            let (lanes, tail) = fold_row_scalar((from, n), t, term, lanes);
            *term.slot += fold_sum(&lanes, tail);
        }
    }
}

/// The whole sixteens of points of one term in four `ymm` sums; returns
/// their lanes and where the rest starts.
///
/// # Safety
///
/// As [`fsmooth_fold_rows`], on a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn fold_row_avx2(n: usize, t: *const f64, term: &FoldTerm) -> ([f64; 16], usize) {
    use std::arch::x86_64::{
        _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_loadu_pd, _mm256_set1_pd, _mm256_storeu_pd,
    };
    let whole = n - n % 16;
    let mut lanes = [-0.0f64; 16];
    // SAFETY: every load and store is below whole ≤ n.
    unsafe {
        let a = _mm256_broadcast_sd(&term.coef);
        let mut acc = [_mm256_set1_pd(-0.0); 4];
        let mut i = 0;
        while i < whole {
            for (k, acc) in acc.iter_mut().enumerate() {
                let at = i + 4 * k;
                let tv = _mm256_loadu_pd(t.add(at));
                let d = term.dest.add(at);
                _mm256_storeu_pd(d, _mm256_fmadd_pd(tv, a, _mm256_loadu_pd(d)));
                *acc = _mm256_fmadd_pd(tv, _mm256_loadu_pd(term.src.add(at)), *acc);
            }
            i += 16;
        }
        for (k, acc) in acc.iter().enumerate() {
            _mm256_storeu_pd(lanes.as_mut_ptr().add(4 * k), *acc);
        }
    }
    (lanes, whole)
}

/// `x + c · r`: fused, or the product rounded and then added to `x`
/// (the evaluator's `x + c * r`).
#[inline(always)]
fn step<const FUSED: bool>(c: f64, r: f64, x: f64) -> f64 {
    if FUSED { c.mul_add(r, x) } else { x + c * r }
}

/// [`step`] in the four lanes of a `ymm`.
///
/// # Safety
///
/// On a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn vstep<const FUSED: bool>(
    c: std::arch::x86_64::__m256d,
    r: std::arch::x86_64::__m256d,
    x: std::arch::x86_64::__m256d,
) -> std::arch::x86_64::__m256d {
    use std::arch::x86_64::{_mm256_add_pd, _mm256_fmadd_pd, _mm256_mul_pd};
    if FUSED {
        _mm256_fmadd_pd(c, r, x)
    } else {
        _mm256_add_pd(x, _mm256_mul_pd(c, r))
    }
}

/// A kernel call's count of elements and its `m` terms, or none when it
/// has no element or no term.
///
/// # Safety
///
/// `terms` holds `m` terms that outlive `'a`.
unsafe fn call<'a, T>(n: i64, terms: *const T, m: i64) -> Option<(usize, &'a [T])> {
    if n <= 0 || m <= 0 {
        return None;
    }
    // SAFETY: the caller's contract; m > 0.
    Some((n as usize, unsafe {
        std::slice::from_raw_parts(terms, m as usize)
    }))
}

/// Whether this CPU has AVX2 and FMA3, asked once.
pub(super) fn avx2_fma() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Elements `from .. n`, one at a time.
///
/// # Safety
///
/// As [`fsmooth_row_sums`].
#[inline(always)]
unsafe fn row_sums_scalar<const FUSED: bool>(
    out: *mut f64,
    from: usize,
    n: usize,
    terms: &[RowTerm],
) {
    for j in from..n {
        // SAFETY: j < n, the length of `out` and of every row.
        unsafe {
            let mut x = *out.add(j);
            for t in terms {
                x = step::<FUSED>(t.coef, *t.row.add(j), x);
            }
            *out.add(j) = x;
        }
    }
}

/// Elements `from .. n` of both rows, one at a time.
///
/// # Safety
///
/// As [`fsmooth_row_sums2`].
#[inline(always)]
unsafe fn row_sums2_scalar<const FUSED: bool>(
    outs: [*mut f64; 2],
    from: usize,
    n: usize,
    terms: &[RowTerm2],
) {
    for (k, out) in outs.into_iter().enumerate() {
        for j in from..n {
            // SAFETY: j < n, the length of both outputs and every row.
            unsafe {
                let mut x = *out.add(j);
                for t in terms {
                    x = step::<FUSED>(t.coefs[k], *t.row.add(j), x);
                }
                *out.add(j) = x;
            }
        }
    }
}

/// Sixteen elements of both rows at a time in eight `ymm` sums, each
/// row's four loaded once for both, then four, then the rest one at a
/// time.
///
/// # Safety
///
/// As [`fsmooth_row_sums2`], on a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_sums2_avx2<const FUSED: bool>(outs: [*mut f64; 2], n: usize, terms: &[RowTerm2]) {
    use std::arch::x86_64::{_mm256_broadcast_sd, _mm256_loadu_pd, _mm256_storeu_pd};
    let [o0, o1] = outs;
    let mut j = 0;
    // SAFETY: every load and store is at j + 16 ≤ n or j + 4 ≤ n.
    unsafe {
        while j + 16 <= n {
            let (p, q) = (o0.add(j), o1.add(j));
            let (mut a0, mut a1) = (_mm256_loadu_pd(p), _mm256_loadu_pd(p.add(4)));
            let (mut a2, mut a3) = (_mm256_loadu_pd(p.add(8)), _mm256_loadu_pd(p.add(12)));
            let (mut b0, mut b1) = (_mm256_loadu_pd(q), _mm256_loadu_pd(q.add(4)));
            let (mut b2, mut b3) = (_mm256_loadu_pd(q.add(8)), _mm256_loadu_pd(q.add(12)));
            for t in terms {
                let c = _mm256_broadcast_sd(&t.coefs[0]);
                let d = _mm256_broadcast_sd(&t.coefs[1]);
                let r = t.row.add(j);
                let (r0, r1) = (_mm256_loadu_pd(r), _mm256_loadu_pd(r.add(4)));
                let (r2, r3) = (_mm256_loadu_pd(r.add(8)), _mm256_loadu_pd(r.add(12)));
                a0 = vstep::<FUSED>(c, r0, a0);
                a1 = vstep::<FUSED>(c, r1, a1);
                a2 = vstep::<FUSED>(c, r2, a2);
                a3 = vstep::<FUSED>(c, r3, a3);
                b0 = vstep::<FUSED>(d, r0, b0);
                b1 = vstep::<FUSED>(d, r1, b1);
                b2 = vstep::<FUSED>(d, r2, b2);
                b3 = vstep::<FUSED>(d, r3, b3);
            }
            _mm256_storeu_pd(p, a0);
            _mm256_storeu_pd(p.add(4), a1);
            _mm256_storeu_pd(p.add(8), a2);
            _mm256_storeu_pd(p.add(12), a3);
            _mm256_storeu_pd(q, b0);
            _mm256_storeu_pd(q.add(4), b1);
            _mm256_storeu_pd(q.add(8), b2);
            _mm256_storeu_pd(q.add(12), b3);
            j += 16;
        }
        while j + 4 <= n {
            let (p, q) = (o0.add(j), o1.add(j));
            let (mut a, mut b) = (_mm256_loadu_pd(p), _mm256_loadu_pd(q));
            for t in terms {
                let r = _mm256_loadu_pd(t.row.add(j));
                a = vstep::<FUSED>(_mm256_broadcast_sd(&t.coefs[0]), r, a);
                b = vstep::<FUSED>(_mm256_broadcast_sd(&t.coefs[1]), r, b);
            }
            _mm256_storeu_pd(p, a);
            _mm256_storeu_pd(q, b);
            j += 4;
        }
        row_sums2_scalar::<FUSED>(outs, j, n, terms);
    }
}

/// Sixteen elements at a time in four `ymm` sums, then four, then the
/// rest one at a time.
///
/// # Safety
///
/// As [`fsmooth_row_sums`], on a CPU with AVX2 and FMA3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_sums_avx2<const FUSED: bool>(out: *mut f64, n: usize, terms: &[RowTerm]) {
    use std::arch::x86_64::{_mm256_broadcast_sd, _mm256_loadu_pd, _mm256_storeu_pd};
    let mut j = 0;
    // SAFETY: every load and store is at j + 16 ≤ n or j + 4 ≤ n.
    unsafe {
        while j + 16 <= n {
            let o = out.add(j);
            let mut s0 = _mm256_loadu_pd(o);
            let mut s1 = _mm256_loadu_pd(o.add(4));
            let mut s2 = _mm256_loadu_pd(o.add(8));
            let mut s3 = _mm256_loadu_pd(o.add(12));
            for t in terms {
                let c = _mm256_broadcast_sd(&t.coef);
                let r = t.row.add(j);
                s0 = vstep::<FUSED>(c, _mm256_loadu_pd(r), s0);
                s1 = vstep::<FUSED>(c, _mm256_loadu_pd(r.add(4)), s1);
                s2 = vstep::<FUSED>(c, _mm256_loadu_pd(r.add(8)), s2);
                s3 = vstep::<FUSED>(c, _mm256_loadu_pd(r.add(12)), s3);
            }
            _mm256_storeu_pd(o, s0);
            _mm256_storeu_pd(o.add(4), s1);
            _mm256_storeu_pd(o.add(8), s2);
            _mm256_storeu_pd(o.add(12), s3);
            j += 16;
        }
        while j + 4 <= n {
            let o = out.add(j);
            let mut s = _mm256_loadu_pd(o);
            for t in terms {
                let c = _mm256_broadcast_sd(&t.coef);
                s = vstep::<FUSED>(c, _mm256_loadu_pd(t.row.add(j)), s);
            }
            _mm256_storeu_pd(o, s);
            j += 4;
        }
        row_sums_scalar::<FUSED>(out, j, n, terms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each term's row receives its fused products and its slot the
    /// partial sums of the documented grouping, for counts of points
    /// below, at and past whole sixteens.
    #[test]
    fn fold_rows_fuse_their_products_and_group_their_sums_as_documented() {
        for n in [0usize, 1, 5, 15, 16, 17, 33, 50] {
            let t: Vec<f64> = (0..n).map(|i| 0.3 + (i as f64) * 1.7e-1).collect();
            let srcs: Vec<Vec<f64>> = (0..3)
                .map(|s| (0..n).map(|i| ((s * 31 + i) as f64).sin()).collect())
                .collect();
            let mut dests: Vec<Vec<f64>> = (0..3).map(|s| vec![0.1 * s as f64; n]).collect();
            let mut slots = [0.25, -1.5, 3.0];
            let coefs = [1.0 / 3.0, -7.25, 1e-3];
            let before = (dests.clone(), slots);
            let terms: Vec<FoldTerm> = (0..3)
                .map(|s| FoldTerm {
                    coef: coefs[s],
                    dest: dests[s].as_mut_ptr(),
                    src: srcs[s].as_ptr(),
                    slot: &mut slots[s],
                })
                .collect();
            // SAFETY: every row holds n Doubles; rows and slots are distinct.
            unsafe { fsmooth_fold_rows(n as i64, t.as_ptr(), terms.as_ptr(), 3) };
            let whole = n - n % 16;
            for s in 0..3 {
                let mut lanes = [-0.0f64; 16];
                let mut tail = -0.0f64;
                for i in 0..n {
                    let want = t[i].mul_add(coefs[s], before.0[s][i]);
                    assert_eq!(
                        dests[s][i].to_bits(),
                        want.to_bits(),
                        "n {n} term {s} point {i}"
                    );
                    if i < whole {
                        lanes[i % 16] = t[i].mul_add(srcs[s][i], lanes[i % 16]);
                    } else {
                        tail = t[i].mul_add(srcs[s][i], tail);
                    }
                }
                let v: Vec<f64> = (0..4)
                    .map(|k| (lanes[k] + lanes[4 + k]) + (lanes[8 + k] + lanes[12 + k]))
                    .collect();
                let want = before.1[s] + (((v[0] + v[1]) + (v[2] + v[3])) + tail);
                assert_eq!(slots[s].to_bits(), want.to_bits(), "n {n} slot {s}");
            }
        }
    }

    /// Every element, in each of the kernel's three paths, is the terms
    /// fused in order onto its initial value.
    #[test]
    fn each_element_fuses_its_terms_in_order() {
        for n in [0usize, 1, 3, 4, 5, 16, 17, 21, 37] {
            let rows: Vec<Vec<f64>> = (0..5)
                .map(|i| (0..n).map(|j| 0.1 * (i * 7 + j) as f64 + 1e-3).collect())
                .collect();
            let coefs = [1.0 / 3.0, -2.5, 1e-8, 7.25, -0.125];
            let terms: Vec<RowTerm> = rows
                .iter()
                .zip(coefs)
                .map(|(r, c)| RowTerm {
                    coef: c,
                    row: r.as_ptr(),
                })
                .collect();
            let init: Vec<f64> = (0..n).map(|j| j as f64 / 7.0).collect();
            let mut out = init.clone();
            // SAFETY: `out` and every row hold n Doubles.
            unsafe { fsmooth_row_sums(out.as_mut_ptr(), n as i64, terms.as_ptr(), 5) };
            for j in 0..n {
                let want = rows
                    .iter()
                    .zip(coefs)
                    .fold(init[j], |x, (r, c)| c.mul_add(r[j], x));
                assert_eq!(out[j].to_bits(), want.to_bits(), "element {j} of {n}");
            }
            // Two rows over the same terms, the second with other
            // coefficients.
            let terms2: Vec<RowTerm2> = rows
                .iter()
                .zip(coefs)
                .map(|(r, c)| RowTerm2 {
                    coefs: [c, 1.0 - c],
                    row: r.as_ptr(),
                })
                .collect();
            let (mut a, mut b) = (init.clone(), init.iter().map(|x| -x).collect::<Vec<_>>());
            // SAFETY: `a`, `b` and every row hold n Doubles.
            unsafe {
                fsmooth_row_sums2(a.as_mut_ptr(), b.as_mut_ptr(), n as i64, terms2.as_ptr(), 5)
            };
            for j in 0..n {
                let want = |k: usize, x0: f64| {
                    terms2
                        .iter()
                        .zip(&rows)
                        .fold(x0, |x, (t, r)| t.coefs[k].mul_add(r[j], x))
                };
                assert_eq!(
                    a[j].to_bits(),
                    want(0, init[j]).to_bits(),
                    "row 0, {j} of {n}"
                );
                assert_eq!(
                    b[j].to_bits(),
                    want(1, -init[j]).to_bits(),
                    "row 1, {j} of {n}"
                );
            }
            let (mut a, mut b) = (init.clone(), init.iter().map(|x| -x).collect::<Vec<_>>());
            // SAFETY: `a`, `b` and every row hold n Doubles.
            unsafe {
                fsmooth_row_sums2_exact(
                    a.as_mut_ptr(),
                    b.as_mut_ptr(),
                    n as i64,
                    terms2.as_ptr(),
                    5,
                )
            };
            for j in 0..n {
                let want = |k: usize, x0: f64| {
                    terms2
                        .iter()
                        .zip(&rows)
                        .fold(x0, |x, (t, r)| x + t.coefs[k] * r[j])
                };
                assert_eq!(
                    a[j].to_bits(),
                    want(0, init[j]).to_bits(),
                    "exact row 0, {j}"
                );
                assert_eq!(
                    b[j].to_bits(),
                    want(1, -init[j]).to_bits(),
                    "exact row 1, {j}"
                );
            }
        }
    }
}
