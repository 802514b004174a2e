//! Which arrays live only as long as one loop iteration (Note [Scratch
//! arrays]).
//!
//! # Note [Scratch arrays]
//!
//! The arena frees nothing during a call, so an array built in a loop body
//! costs its bytes once per iteration: bundle adjustment's forward-mode
//! Jacobian took 165 MB for 10⁵ points, against 18 MB of output, because
//! every point and column built arrays nobody reads afterwards. Here each
//! array an iteration builds gets a *lifetime*: the innermost loop of
//! whose iteration it cannot outlive. Buffers with a lifetime come from
//! one of the arena's two *scratch* stacks; an iteration of a *releasing*
//! loop starts with a mark of the stack and ends by moving the stack back
//! to it, so the next iteration reuses the same memory.
//!
//! Lifetimes. A binding allocates the buffer it binds when its right side
//! is a `build`, an `iscan`, an array literal, a `concat` or an `accum`
//! (each writes a fresh buffer). Values reach other bindings along *flow*
//! edges x → y ("y may point to what x points to"), between *leaves*: the
//! components of a value once its pairs are flattened (an array, whatever
//! its elements, is one leaf). A pair's operands flow into their own
//! leaves of the pair, a projection takes the projected leaves, a
//! conditional's branch results and a fold's initial state and body
//! result (through its state variable) flow into the binding leaf by leaf;
//! a read `a[k]` and any other primitive let every leaf of every operand
//! flow into every leaf of the result. Following leaves apart matters for
//! reverse mode, whose inner loops carry a long-lived accumulator and an
//! iteration's cotangent array in one state: merged, the iteration's
//! array would reach the accumulator's names and never be released (GMM
//! `1k/gmm_d10_K25`'s gradient kept 2 MB of them). A fresh
//! buffer (`build`, `iscan`, literal, `concat`, `accum`) copies what it
//! receives, so there the edge exists only when its elements hold arrays
//! (they are pointers to the same buffers). No edge enters a leaf that
//! holds no array. Every name is bound once, at a *place*: the loops
//! around it, innermost last; a loop's own binding and its state variable
//! are placed outside the loop (they outlive an iteration). The lifetime
//! of a buffer bound to x is then the longest common prefix of the places
//! of every name with a leaf reachable from x's: the buffer is dead when
//! an iteration of that prefix's innermost loop ends, because no name bound outside
//! that iteration can point to it. An empty prefix means the buffer
//! may outlive every loop (it reaches the result): it stays in the main
//! arena, as does every buffer bound outside all loops.
//!
//! Stacks. A buffer whose lifetime is the innermost loop around its
//! binding (a temporary of one iteration) goes to stack 0, which that loop
//! releases after each iteration; such buffers never outlive a release of
//! stack 0 by any loop. The others go to stack 1, where a loop that
//! releases frees everything allocated during its iteration, so it must
//! not release while a buffer with a longer lifetime was allocated inside
//! it. A loop releases stack 1 when it is the lifetime of some such buffer
//! and no such buffer allocated inside it has a lifetime further out; each
//! buffer is released by the innermost releasing loop at or outside its
//! lifetime (so it may live longer than it needs to, never shorter), or,
//! when there is none, stays in the main arena; the two rules are applied
//! until nothing changes. In bundle adjustment's Jacobian, the pass over
//! the points for one column builds each point's projection (which the
//! column's pass keeps until it has flattened the points) and three
//! temporaries: the temporaries go to stack 0, released after each point,
//! and the projections to stack 1, released after each column, so the
//! next column reuses the pass's memory (N = 10⁵: 165 MB → 62 MB, of
//! which 18 MB is the Jacobian).
//!
//! Windows. Each stack allocates from a window `base ≤ cur ≤ end` in the
//! call's context by moving `cur`, inline; the runtime is called only for
//! a new chunk. A mark is `cur`; a release moves `cur` back when the mark
//! is in the window's chunk, and otherwise asks the runtime to free the
//! chunks since (`Arena::release_scratch`, which keeps one chunk rather
//! than free and take one per iteration).
//!
//! A `while` is a loop too, named by its state variable: an iteration is
//! one test and the step after it, and the state is bound outside it, so
//! an array the step builds and the next state does not reach dies with
//! the iteration (a `while` that concatenated two vectors of 10⁵ elements
//! per step kept every step's copy: 6000 steps needed 9.6 GB, and native
//! code ran out of memory at 8.4, where the evaluator holds one). The last test, after which no step runs, is
//! released on the way out: inside a loop that releases nothing itself,
//! each of its iterations would otherwise keep one test's arrays.
//!
//! A ⊥ leaves an iteration without releasing, which is harmless: the call
//! ends and its arena is reset (in an object file, `fsmooth_ctx_release`
//! frees what is left). Fused arrays (Note [Fusion]) and unrolled small
//! arrays allocate nothing and are unaffected. Values do not change, only
//! where buffers live: the results and ⊥s are the evaluator's, which the
//! native test suites check on every program they compile.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::anf::{Atom, Block, LoopKind, Rhs};
use crate::ir::{Name, Prim, Type};

/// The scratch arrays of a function, each with the loop that releases it
/// (named by its index variable, or a `while` by its state variable) and its stack, and per releasing loop the
/// stacks it releases.
#[derive(Default, Debug)]
pub struct Scratch {
    pub arrays: HashMap<Name, (Name, usize)>,
    pub loops: HashMap<Name, Vec<usize>>,
}

impl Scratch {
    /// The plan as listing comments: per releasing loop and stack, the
    /// arrays it releases.
    pub fn describe(&self) -> String {
        let mut rows: Vec<(&Name, usize, Vec<&Name>)> = Vec::new();
        for (l, ks) in &self.loops {
            rows.extend(ks.iter().map(|&k| (l, k, Vec::new())));
        }
        rows.sort();
        for (x, (l, k)) in &self.arrays {
            if let Some(row) = rows.iter_mut().find(|r| r.0 == l && r.1 == *k) {
                row.2.push(x);
            }
        }
        let mut out = String::from(";; scratch arrays (Note [Scratch arrays])\n");
        if rows.is_empty() {
            out.push_str(";; none: every array is in the main arena\n");
        }
        for (l, k, mut xs) in rows {
            xs.sort();
            let xs: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
            out.push_str(&format!(
                ";; the loop over {l} releases stack {k}: {}\n",
                xs.join(", ")
            ));
        }
        out
    }

    fn add(&mut self, x: &Name, stack: usize, releaser: &Name) {
        self.arrays.insert(x.clone(), (releaser.clone(), stack));
        let ks = self.loops.entry(releaser.clone()).or_default();
        if !ks.contains(&stack) {
            ks.push(stack);
        }
    }
}

/// A value's part: a name and one of its *leaves*, the components its
/// type has once pairs are flattened (an array is one leaf, whatever its
/// elements), so that a pair's components flow apart.
type Node = (Name, usize);

/// The leaves of a type, in order: pairs flattened, all else one leaf.
fn leaves(t: &Type) -> Vec<&Type> {
    match t {
        Type::Pair(a, b) => {
            let mut out = leaves(a);
            out.extend(leaves(b));
            out
        }
        other => vec![other],
    }
}

/// The names of a function with their places and flow edges.
#[derive(Default)]
struct Graph {
    /// The loops around each binder (index variables), innermost last.
    place: HashMap<Name, Vec<Name>>,
    /// x → y, between leaves that hold arrays.
    edges: Vec<(Node, Node)>,
    /// The bindings that allocate their buffer, inside some loop.
    sites: Vec<Name>,
}

/// The scratch arrays of `body` and the loops that release them (Note
/// [Scratch arrays]).
pub fn plan(body: &Block) -> Scratch {
    let mut g = Graph::default();
    g.block(body, &[]);
    // The lifetime of every leaf, as a prefix length of its name's place:
    // leaves numbered, each with its place, and each edge x → y examined
    // again whenever y's lifetime shrinks (a worklist; lifetimes only
    // shrink, so this ends).
    let mut ids: HashMap<&Node, usize> = HashMap::default();
    let mut places: Vec<&[Name]> = Vec::new();
    let mut edges: Vec<(usize, usize)> = Vec::with_capacity(g.edges.len());
    for (x, y) in &g.edges {
        let (Some(px), Some(py)) = (g.place.get(&x.0), g.place.get(&y.0)) else {
            continue;
        };
        let mut pair = [0; 2];
        for (k, (n, p)) in [(x, px), (y, py)].into_iter().enumerate() {
            pair[k] = *ids.entry(n).or_insert_with(|| {
                places.push(p);
                places.len() - 1
            });
        }
        edges.push((pair[0], pair[1]));
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); places.len()];
    for &(a, b) in &edges {
        preds[b].push(a);
    }
    let mut life: Vec<usize> = places.iter().map(|p| p.len()).collect();
    let common = |a: &[Name], b: &[Name]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let mut work: Vec<usize> = (0..places.len()).collect();
    while let Some(y) = work.pop() {
        for &x in &preds[y] {
            let l = common(&places[x][..life[x]], &places[y][..life[y]]);
            if l < life[x] {
                life[x] = l;
                work.push(x);
            }
        }
    }
    // A buffer is leaf 0 of the array-typed name it is bound to.
    let life: HashMap<&Name, usize> = g
        .sites
        .iter()
        .map(|x| {
            let at = ids
                .get(&(x.clone(), 0))
                .map_or(g.place[x].len(), |&k| life[k]);
            (x, at)
        })
        .collect();
    // Stack 0: the buffers that die with an iteration of their innermost
    // loop, which releases them. Stack 1: the others. Its releasing loops:
    // start from every lifetime, drop a loop that some buffer allocated
    // inside it outlives, until stable.
    let mut out = Scratch::default();
    let (inner, outer): (Vec<&Name>, Vec<&Name>) = g
        .sites
        .iter()
        .filter(|x| life[x] > 0)
        .partition(|x| life[x] == g.place[*x].len());
    for x in inner {
        out.add(x, 0, &g.place[x][life[x] - 1]);
    }
    let mut releasing: HashSet<&Name> = outer.iter().map(|x| &g.place[*x][life[*x] - 1]).collect();
    let released_by = |x: &Name, releasing: &HashSet<&Name>| -> Option<usize> {
        (0..life[x])
            .rev()
            .find(|&k| releasing.contains(&g.place[x][k]))
    };
    loop {
        let mut drop = Vec::new();
        for x in &outer {
            // Every loop between a scratch buffer's binding and its
            // releaser would free it too early. (A buffer no loop
            // releases is in the main arena, which no loop releases.)
            if let Some(k) = released_by(x, &releasing) {
                let inner = g.place[*x][k + 1..].iter();
                drop.extend(inner.filter(|l| releasing.contains(l)));
            }
        }
        if drop.is_empty() {
            break;
        }
        for l in drop {
            releasing.remove(l);
        }
    }
    for x in outer {
        if let Some(k) = released_by(x, &releasing) {
            out.add(x, 1, &g.place[x][k]);
        }
    }
    out
}

impl Graph {
    fn place(&mut self, x: &Name, at: &[Name]) {
        self.place.insert(x.clone(), at.to_vec());
    }

    /// Leaf `k` of x → leaf `j` of y, when y's leaf `j` holds arrays.
    fn edge(&mut self, x: &Name, k: usize, y: &Name, j: usize, yleaf: &Type) {
        if yleaf.has_array() {
            self.edges.push(((x.clone(), k), (y.clone(), j)));
        }
    }

    /// Leaf by leaf, a part of type `part`: `x`'s leaves from `from` on
    /// flow into `y`'s from `to` on (a pair's operand, a projection, a
    /// branch's result, a fold's state).
    fn flow_part(&mut self, x: &Atom, from: usize, y: &Name, to: usize, part: &Type) {
        if let Some(x) = x.var() {
            for (j, l) in leaves(part).into_iter().enumerate() {
                self.edge(x, from + j, y, to + j, l);
            }
        }
    }

    /// [`flow_part`](Self::flow_part) of all of `y : ty`.
    fn flow_leaves(&mut self, x: &Atom, from: usize, y: &Name, ty: &Type) {
        self.flow_part(x, from, y, 0, ty);
    }

    /// Every leaf of `x` may flow into every leaf of `y : ty` that holds
    /// arrays (a read of an array's element, an `addAt`, any primitive).
    fn flow_all(&mut self, x: &Atom, y: &Name, ty: &Type) {
        if let Atom::Var(x, xt) = x {
            let ys = leaves(ty);
            for (k, xl) in leaves(xt).into_iter().enumerate() {
                if !xl.has_array() {
                    continue;
                }
                for (j, l) in ys.iter().enumerate() {
                    self.edge(x, k, y, j, l);
                }
            }
        }
    }

    /// Into a fresh buffer `y` (one leaf) whose elements have type `elem`:
    /// it copies what it receives, so it points to other buffers only when
    /// its elements hold arrays.
    fn flow_into_buffer(&mut self, x: &Atom, y: &Name, elem: &Type) {
        if elem.has_array() {
            self.flow_all(x, y, &Type::array(elem.clone()));
        }
    }

    fn block(&mut self, b: &Block, at: &[Name]) {
        for bind in &b.binds {
            let (y, ty) = (&bind.name, &bind.ty);
            self.place(y, at);
            // The type of what a fresh buffer copies in: its elements'.
            let elem = match ty {
                Type::Array(e) => e.as_ref(),
                other => other,
            };
            if !at.is_empty() && allocates(&bind.rhs) {
                self.sites.push(y.clone());
            }
            match &bind.rhs {
                Rhs::Prim(Prim::Concat | Prim::Accum, args) | Rhs::Array(args) => {
                    args.iter().for_each(|a| self.flow_into_buffer(a, y, elem))
                }
                Rhs::Prim(Prim::Pair, args) => {
                    let first = leaves(args[0].ty()).len();
                    let (fst_t, snd_t) = match ty {
                        Type::Pair(a, b) => (a.as_ref(), b.as_ref()),
                        _ => unreachable!("a pair has a pair type"),
                    };
                    self.flow_part(&args[0], 0, y, 0, fst_t);
                    self.flow_part(&args[1], 0, y, first, snd_t);
                }
                Rhs::Prim(Prim::Fst, args) => self.flow_leaves(&args[0], 0, y, ty),
                Rhs::Prim(Prim::Snd, args) => {
                    let skip = match args[0].ty() {
                        Type::Pair(a, _) => leaves(a).len(),
                        _ => unreachable!("snd of a pair"),
                    };
                    self.flow_leaves(&args[0], skip, y, ty)
                }
                Rhs::Prim(_, args) => args.iter().for_each(|a| self.flow_all(a, y, ty)),
                Rhs::If(_, t, e) => {
                    self.block(t, at);
                    self.block(e, at);
                    self.flow_leaves(&t.result, 0, y, ty);
                    self.flow_leaves(&e.result, 0, y, ty);
                }
                // A `while` is a loop named by its state variable: its
                // test and step are placed inside it (an iteration is one
                // test and one step), the state outside, and the state
                // flows like a fold's.
                Rhs::While {
                    init,
                    state,
                    ty: sty,
                    cond,
                    step,
                } => {
                    self.place(state, at);
                    let mut inner = at.to_vec();
                    inner.push(state.clone());
                    self.block(cond, &inner);
                    self.block(step, &inner);
                    self.flow_leaves(init, 0, state, sty);
                    self.flow_leaves(&step.result, 0, state, sty);
                    let sv = Atom::Var(state.clone(), sty.clone());
                    self.flow_leaves(&sv, 0, y, ty);
                }
                Rhs::Loop {
                    kind,
                    state,
                    index,
                    body,
                    ..
                } => {
                    let mut inner = at.to_vec();
                    inner.push(index.clone());
                    self.place(index, &inner);
                    self.block(body, &inner);
                    match state {
                        None => self.flow_into_buffer(&body.result, y, elem),
                        Some((z, s, sty)) => {
                            self.place(s, at);
                            self.flow_leaves(z, 0, s, sty);
                            self.flow_leaves(&body.result, 0, s, sty);
                            let sv = Atom::Var(s.clone(), sty.clone());
                            if *kind == LoopKind::IScan {
                                self.flow_into_buffer(&sv, y, elem);
                                self.flow_into_buffer(&body.result, y, elem);
                            } else {
                                self.flow_leaves(&sv, 0, y, ty);
                                self.flow_leaves(&body.result, 0, y, ty);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Whether `rhs` allocates the array it binds.
fn allocates(rhs: &Rhs) -> bool {
    matches!(
        rhs,
        Rhs::Array(_)
            | Rhs::Prim(Prim::Concat | Prim::Accum, _)
            | Rhs::Loop {
                kind: LoopKind::Build | LoopKind::IScan,
                ..
            }
    )
}
