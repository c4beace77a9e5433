//! Symbolic dim expressions for bounded dims: integer polynomials over named dims,
//! floor-divisions by positive constants (what Conv, pooling, Reshape and shape subgraphs make
//! of `h`, `w`, `batch`) and minima (a Slice bound clamped to its dim). Kept in one canonical form, so two expressions for the same size
//! compare equal, evaluated with a name → value map, and rendered as Rust code for generated
//! `forward`.
use std::collections::BTreeMap;
use std::fmt;

/// A factor of a term: a named dim, `floor(e / c)` of an expression that does not divide, or
/// the smaller of two expressions whose order the dims decide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Var(String),
    FloorDiv(Box<DimExpr>, i64),
    Min(Box<DimExpr>, Box<DimExpr>),
}

/// Σ coefficient · Π atoms; the empty product is the constant term. Terms with coefficient
/// zero are never stored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DimExpr {
    terms: BTreeMap<Vec<Atom>, i64>,
}

impl DimExpr {
    pub fn constant(c: i64) -> DimExpr {
        let mut e = DimExpr::default();
        e.add_term(vec![], c);
        e
    }

    pub fn var(name: &str) -> DimExpr {
        let mut e = DimExpr::default();
        e.add_term(vec![Atom::Var(name.to_string())], 1);
        e
    }

    fn add_term(&mut self, mut atoms: Vec<Atom>, c: i64) {
        atoms.sort();
        let k = self.terms.entry(atoms).or_insert(0);
        // Saturating, not panicking, on absurd coefficients: a saturated size then disagrees
        // with the static shape at the bound, which codegen reports as an error.
        *k = k.saturating_add(c);
        let zero = *k == 0;
        if zero {
            self.terms.retain(|_, v| *v != 0);
        }
    }

    /// The value when no named dim occurs.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&vec![]).copied(),
            _ => None,
        }
    }

    pub fn add(&self, o: &DimExpr) -> DimExpr {
        let mut e = self.clone();
        for (a, &c) in &o.terms {
            e.add_term(a.clone(), c);
        }
        e
    }

    pub fn scale(&self, k: i64) -> DimExpr {
        let mut e = DimExpr::default();
        for (a, &c) in &self.terms {
            e.add_term(a.clone(), c.saturating_mul(k));
        }
        e
    }

    pub fn sub(&self, o: &DimExpr) -> DimExpr {
        self.add(&o.scale(-1))
    }

    pub fn mul(&self, o: &DimExpr) -> DimExpr {
        let mut e = DimExpr::default();
        for (a, &c) in &self.terms {
            for (b, &d) in &o.terms {
                let mut atoms = a.clone();
                atoms.extend(b.iter().cloned());
                e.add_term(atoms, c.saturating_mul(d));
            }
        }
        e
    }

    /// `floor(self / c)` for `c > 0`: multiples of `c` come out of the division
    /// (`floor((c·q + r) / c) = q + floor(r / c)` for integer `q`), the rest stays an atom.
    /// Callers check `c > 0`; a non-positive `c` leaves the expression as it is.
    pub fn floor_div(&self, c: i64) -> DimExpr {
        if c <= 1 {
            return self.clone();
        }
        let (mut q, mut r) = (DimExpr::default(), DimExpr::default());
        for (a, &k) in &self.terms {
            q.add_term(a.clone(), k.div_euclid(c));
            r.add_term(a.clone(), k.rem_euclid(c));
        }
        match r.as_const() {
            Some(rc) => q.add(&DimExpr::constant(rc.div_euclid(c))),
            None => q.add(&DimExpr { terms: BTreeMap::from([(vec![Atom::FloorDiv(Box::new(r), c)], 1)]) }),
        }
    }

    /// `ceil(self / c)` for `c > 0`.
    pub fn ceil_div(&self, c: i64) -> DimExpr {
        self.add(&DimExpr::constant(c - 1)).floor_div(c)
    }

    /// `self / d` when it divides exactly as polynomials (a Reshape's `-1`): `d` a nonzero
    /// constant dividing every coefficient, or one term whose atoms occur in every term.
    pub fn exact_div(&self, d: &DimExpr) -> Option<DimExpr> {
        if d.terms.len() != 1 {
            return None;
        }
        let (da, &dc) = d.terms.iter().next()?;
        if dc == 0 {
            return None;
        }
        let mut e = DimExpr::default();
        for (a, &c) in &self.terms {
            if c % dc != 0 {
                return None;
            }
            let mut rest = a.clone();
            for x in da {
                let i = rest.iter().position(|y| y == x)?;
                rest.remove(i);
            }
            e.add_term(rest, c / dc);
        }
        Some(e)
    }

    /// `floor(self / d)` for a monomial `d` (a positive coefficient times named dims): the
    /// exact quotient when there is one, else the quotient by `d`'s named dims floor-divided
    /// by its coefficient. `None` when a term lacks one of `d`'s dims.
    pub fn div_floor(&self, d: &DimExpr) -> Option<DimExpr> {
        if let Some(q) = self.exact_div(d) {
            return Some(q);
        }
        let (da, &dc) = d.terms.iter().next().filter(|_| d.terms.len() == 1)?;
        if dc <= 0 {
            return None;
        }
        let mut dims = DimExpr::default();
        dims.add_term(da.clone(), 1);
        Some(self.exact_div(&dims)?.floor_div(dc))
    }

    /// `c · d1 · d2 …` as `(c, [d1, d2, …])` when the expression is one such term of named dims.
    pub fn as_monomial(&self) -> Option<(i64, Vec<String>)> {
        let (atoms, &c) = self.terms.iter().next().filter(|_| self.terms.len() == 1)?;
        let vars = atoms.iter().map(|a| if let Atom::Var(v) = a { Some(v.clone()) } else { None }).collect::<Option<Vec<_>>>()?;
        Some((c, vars))
    }

    /// `min(self, o)`: one of them when their difference is a constant, else an atom.
    pub fn min_with(&self, o: &DimExpr) -> DimExpr {
        match self.sub(o).as_const() {
            Some(d) if d <= 0 => self.clone(),
            Some(_) => o.clone(),
            None => {
                let (a, b) = if self <= o { (self, o) } else { (o, self) };
                DimExpr { terms: BTreeMap::from([(vec![Atom::Min(Box::new(a.clone()), Box::new(b.clone()))], 1)]) }
            }
        }
    }

    /// `self` with named dim `name` replaced by `by`.
    pub fn substitute(&self, name: &str, by: &DimExpr) -> DimExpr {
        let mut out = DimExpr::default();
        for (atoms, &c) in &self.terms {
            let mut t = DimExpr::constant(c);
            for a in atoms {
                let f = match a {
                    Atom::Var(v) if v == name => by.clone(),
                    Atom::Var(v) => DimExpr::var(v),
                    Atom::FloorDiv(e, d) => e.substitute(name, by).floor_div(*d),
                    Atom::Min(a, b) => a.substitute(name, by).min_with(&b.substitute(name, by)),
                };
                t = t.mul(&f);
            }
            out = out.add(&t);
        }
        out
    }

    /// Whether the value never decreases when a named dim grows (for dims ≥ 1): every
    /// non-constant term has a positive coefficient and its floor-divisions are of such
    /// expressions. Then the value at the bounds is the largest, which is what lets the memory
    /// plan size every buffer at the bounds.
    pub fn is_monotone(&self) -> bool {
        self.terms.iter().all(|(atoms, &c)| {
            atoms.is_empty()
                || (c > 0
                    && atoms.iter().all(|a| match a {
                        Atom::Var(_) => true,
                        Atom::FloorDiv(e, _) => e.is_monotone(),
                        Atom::Min(a, b) => a.is_monotone() && b.is_monotone(),
                    }))
        })
    }

    /// The least and greatest value over the box of dims `range(name) = (lo, hi)`, by interval
    /// arithmetic (sound, not always tight: a term's factors range independently). A conv
    /// output `x + 1 - k` over `x, k` in `1..=b` is at most `b`, above its value at the bounds:
    /// what bounded buffers are sized by. `None` if a dim has no range or on overflow.
    pub fn range(&self, range: &dyn Fn(&str) -> Option<(i64, i64)>) -> Option<(i64, i64)> {
        let mul = |(a, b): (i64, i64), (c, d): (i64, i64)| -> Option<(i64, i64)> {
            let p = [a.checked_mul(c)?, a.checked_mul(d)?, b.checked_mul(c)?, b.checked_mul(d)?];
            Some((*p.iter().min()?, *p.iter().max()?))
        };
        let (mut lo, mut hi) = (0i64, 0i64);
        for (atoms, &c) in &self.terms {
            let mut t = (c, c);
            for a in atoms {
                let f = match a {
                    Atom::Var(n) => range(n)?,
                    // Floor division by a positive constant is monotone.
                    Atom::FloorDiv(e, d) => {
                        let (l, h) = e.range(range)?;
                        (l.div_euclid(*d), h.div_euclid(*d))
                    }
                    Atom::Min(a, b) => {
                        let ((al, ah), (bl, bh)) = (a.range(range)?, b.range(range)?);
                        (al.min(bl), ah.min(bh))
                    }
                };
                t = mul(t, f)?;
            }
            lo = lo.checked_add(t.0)?;
            hi = hi.checked_add(t.1)?;
        }
        Some((lo, hi))
    }

    /// The greatest value over the box of dims `range(name) = (lo, hi)`: at the upper ends
    /// when monotone, else the largest of every point of a small box, else [`Self::range`]'s.
    pub fn max_over(&self, range: &dyn Fn(&str) -> Option<(i64, i64)>) -> Option<i64> {
        if self.is_monotone() {
            return self.eval(&|n| range(n).map(|r| r.1));
        }
        let vars: Vec<(String, (i64, i64))> = self.vars().into_iter().map(|v| range(&v).map(|r| (v, r))).collect::<Option<_>>()?;
        let points = vars.iter().try_fold(1u64, |a, (_, (l, h))| a.checked_mul(u64::try_from(h - l + 1).ok()?).filter(|&p| p <= 1 << 16));
        let Some(points) = points else { return self.range(range).map(|r| r.1) };
        let mut best: Option<i64> = None;
        for mut i in 0..points {
            let at: Vec<(&str, i64)> = vars
                .iter()
                .map(|(v, (l, h))| {
                    let n = (h - l + 1) as u64;
                    let x = l + (i % n) as i64;
                    i /= n;
                    (v.as_str(), x)
                })
                .collect();
            let v = self.eval(&|n| at.iter().find(|(m, _)| *m == n).map(|p| p.1))?;
            best = Some(best.map_or(v, |b| b.max(v)));
        }
        best
    }

    /// The named dims that occur.
    pub fn vars(&self) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        for a in self.terms.keys().flatten() {
            match a {
                Atom::Var(v) => {
                    out.insert(v.clone());
                }
                Atom::FloorDiv(e, _) => out.extend(e.vars()),
                Atom::Min(a, b) => {
                    out.extend(a.vars());
                    out.extend(b.vars());
                }
            }
        }
        out
    }

    /// The value with each named dim from `val` (`None` if one is missing or on overflow).
    pub fn eval(&self, val: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut sum = 0i64;
        for (atoms, &c) in &self.terms {
            let mut p = c;
            for a in atoms {
                let v = match a {
                    Atom::Var(n) => val(n)?,
                    Atom::FloorDiv(e, d) => e.eval(val)?.div_euclid(*d),
                    Atom::Min(a, b) => a.eval(val)?.min(b.eval(val)?),
                };
                p = p.checked_mul(v)?;
            }
            sum = sum.checked_add(p)?;
        }
        Some(sum)
    }

    /// A Rust expression of type `i64` (each named dim by `var`, itself an `i64` expression
    /// that is one operand: a name, or in parentheses). Parenthesized only where precedence
    /// needs it: wrap it with [`rust_operand`] before a method call or a cast.
    pub fn to_rust(&self, var: &dyn Fn(&str) -> String) -> String {
        if self.terms.is_empty() {
            return "0i64".into();
        }
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|(atoms, &c)| {
                let mut f: Vec<String> = atoms
                    .iter()
                    .map(|a| match a {
                        Atom::Var(n) => var(n),
                        Atom::FloorDiv(e, d) => format!("{}.div_euclid({d})", rust_operand(e.to_rust(var))),
                        Atom::Min(a, b) => format!("{}.min({})", rust_operand(a.to_rust(var)), b.to_rust(var)),
                    })
                    .collect();
                if c != 1 || f.is_empty() {
                    f.insert(0, format!("{c}i64"));
                }
                f.join(" * ")
            })
            .collect();
        parts.join(" + ")
    }
}

/// Rust expression `e` as one operand of a method call or a cast: as it is when nothing but
/// postfix chains stand outside its parentheses and brackets (`d_h`, `sz[0]`, `(a + b)`,
/// `(a + b).div_euclid(2)`); else in parentheses (`a * b`, `-3i64`).
pub fn rust_operand(e: String) -> String {
    let mut depth = 0i32;
    let mut spaced = false;
    for c in e.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => spaced = true,
            _ => {}
        }
    }
    if spaced || e.starts_with('-') || e.is_empty() {
        format!("({e})")
    } else {
        e
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        for (i, (atoms, &c)) in self.terms.iter().enumerate() {
            let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
            if i > 0 {
                write!(f, " {sign} ")?;
            } else if c < 0 {
                f.write_str("-")?;
            }
            let mut first = true;
            if mag != 1 || atoms.is_empty() {
                write!(f, "{mag}")?;
                first = false;
            }
            for a in atoms {
                if !first {
                    f.write_str("*")?;
                }
                first = false;
                match a {
                    Atom::Var(n) => f.write_str(n)?,
                    Atom::FloorDiv(e, d) => write!(f, "({e})//{d}")?,
                    Atom::Min(a, b) => write!(f, "min({a}, {b})")?,
                }
            }
        }
        Ok(())
    }
}

/// How two sizes must relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rel {
    /// `left == right`.
    Equal,
    /// `left <= right`.
    AtMost,
    /// `right` is a multiple of `left`.
    Divides,
    /// `left != right` (a comparison of dims the graph was compiled for as unequal).
    Differ,
}

impl Rel {
    /// Whether `left rel right` holds for these sizes.
    pub fn between(self, l: i64, r: i64) -> bool {
        match self {
            Rel::Equal => l == r,
            Rel::AtMost => l <= r,
            Rel::Divides => l != 0 && r % l == 0,
            Rel::Differ => l != r,
        }
    }
}

/// A relation between two sizes that an op needs and the dims alone do not decide: bounded
/// code checks it at run time and returns a `DimError`. `what` names the sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub what: String,
    pub rel: Rel,
    pub left: DimExpr,
    pub right: DimExpr,
}

impl Constraint {
    /// Whether it holds, when both sides are constants (or the same expression).
    pub fn holds(&self) -> Option<bool> {
        if self.left == self.right {
            match self.rel {
                Rel::Equal | Rel::AtMost => return Some(true),
                Rel::Differ => return Some(false),
                Rel::Divides => {}
            }
        }
        Some(self.rel.between(self.left.as_const()?, self.right.as_const()?))
    }

    /// Whether it holds where each dim takes `val`'s value (`None`: a dim without one).
    pub fn holds_at(&self, val: &dyn Fn(&str) -> Option<i64>) -> Option<bool> {
        Some(self.rel.between(self.left.eval(val)?, self.right.eval(val)?))
    }

    /// [`Constraint::failure`] with each dim at `val`'s value.
    pub fn failure_at(&self, val: &dyn Fn(&str) -> Option<i64>) -> String {
        let at = |e: &DimExpr| e.eval(val).map_or_else(|| e.clone(), DimExpr::constant);
        Constraint { left: at(&self.left), right: at(&self.right), ..self.clone() }.failure()
    }

    /// The error when it does not hold at constant sizes.
    pub fn failure(&self) -> String {
        let (l, r) = (&self.left, &self.right);
        match self.rel {
            Rel::Equal => format!("{} are {l} and {r}", self.what),
            Rel::AtMost => format!("{}: {l} is more than {r}", self.what),
            Rel::Divides => format!("{}: {r} is not a multiple of {l}", self.what),
            Rel::Differ => format!("{}: {l} and {r} are equal", self.what),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: i64) -> impl Fn(&str) -> Option<i64> {
        move |n| (n == "h").then_some(h)
    }

    #[test]
    fn conv_and_pool_sizes_simplify_and_evaluate() {
        let h = DimExpr::var("h");
        // 3x3 conv, pad 1, stride 1: (h + 2 - 3) / 1 + 1 = h.
        let c = h.add(&DimExpr::constant(2 - 3)).floor_div(1).add(&DimExpr::constant(1));
        assert_eq!(c, h);
        // 2x2 pool, stride 2: floor((h - 2) / 2) + 1 = floor(h / 2).
        let p = h.sub(&DimExpr::constant(2)).floor_div(2).add(&DimExpr::constant(1));
        assert_eq!(p, h.floor_div(2));
        for v in 1..40 {
            assert_eq!(p.eval(&at(v)), Some(v.div_euclid(2)));
        }
        // Multiples come out of the division: (4h + 6) / 2 = 2h + 3.
        assert_eq!(h.scale(4).add(&DimExpr::constant(6)).floor_div(2), h.scale(2).add(&DimExpr::constant(3)));
    }

    #[test]
    fn exact_division_recovers_a_reshape_minus_one() {
        let (b, h) = (DimExpr::var("b"), DimExpr::var("h").floor_div(4));
        let total = b.mul(&DimExpr::constant(16)).mul(&h).mul(&h);
        assert_eq!(total.exact_div(&b), Some(DimExpr::constant(16).mul(&h).mul(&h)));
        assert_eq!(total.exact_div(&DimExpr::var("w")), None);
        assert!(total.is_monotone() && !DimExpr::constant(9).sub(&b).is_monotone());
        assert_eq!(DimExpr::var("h").exact_div(&DimExpr::constant(2)), None);
    }

    #[test]
    fn rust_rendering_matches_evaluation() {
        let h = DimExpr::var("h");
        let e = h.sub(&DimExpr::constant(3)).floor_div(2).mul(&h).add(&DimExpr::constant(-1));
        assert!(e.to_rust(&|n| format!("d_{n}")).contains("div_euclid(2)"));
        // floor((1 - 3) / 2) = -1, so -1·1 - 1 = -2.
        assert_eq!(e.eval(&at(1)), Some(-2));
        assert!(e.vars().contains("h"));
        assert_eq!(format!("{}", h.floor_div(2)), "(h)//2");
    }

    #[test]
    fn ranges_bound_sizes_that_shrink_as_a_dim_grows() {
        let (x, k) = (DimExpr::var("x"), DimExpr::var("k"));
        let c = DimExpr::constant;
        let r = |n: &str| Some(if n == "x" { (1, 10) } else { (1, 6) });
        // A conv output (x + 2 - k) / 2 + 1: largest at the least kernel, not at the bounds.
        let o = x.add(&c(2)).sub(&k).floor_div(2).add(&c(1));
        assert!(!o.is_monotone());
        assert_eq!(o.eval(&|n| Some(if n == "x" { 10 } else { 6 })), Some(4));
        // The division's normal form `2 - k + (x + k)//2` loses that k occurs twice.
        assert_eq!(o.range(&r), Some((-3, 9)));
        assert_eq!(o.max_over(&r), Some(6));
        assert_eq!(x.mul(&k).sub(&k).range(&r), Some((-5, 59)));
        assert_eq!(x.mul(&k).sub(&k).max_over(&r), Some(54));
        assert_eq!(c(3).max_over(&r), Some(3));
        assert_eq!(x.max_over(&|_| None), None);
    }

    #[test]
    fn minima_fold_when_the_dims_decide_them() {
        let h = DimExpr::var("h");
        let c = DimExpr::constant;
        assert_eq!(h.min_with(&h.add(&c(2))), h);
        assert_eq!(c(3).min_with(&c(-1)), c(-1));
        // A start clamped to the last index: min(20, h − 1), monotone, 19 at h = 20.
        let m = c(20).min_with(&h.sub(&c(1)));
        assert_eq!(m, h.sub(&c(1)).min_with(&c(20)));
        assert!(m.is_monotone() && m.vars().contains("h"));
        assert_eq!(m.eval(&at(20)), Some(19));
        assert_eq!(m.eval(&at(40)), Some(20));
        assert_eq!(m.substitute("h", &c(8)), c(7));
        assert_eq!(format!("{m}"), "min(-1 + h, 20)");
        let r = m.to_rust(&|n| format!("d_{n}"));
        assert!(r.contains(".min("), "{r}");
    }

    #[test]
    fn rust_expressions_take_parentheses_only_where_precedence_needs_them() {
        let (h, c) = (DimExpr::var("h"), DimExpr::constant);
        let var = |n: &str| format!("d_{n}");
        assert_eq!(h.to_rust(&var), "d_h");
        assert_eq!(c(1).add(&h.floor_div(2)).floor_div(2).to_rust(&var), "(1i64 + d_h.div_euclid(2)).div_euclid(2)");
        assert_eq!(c(1).add(&h.floor_div(2)).floor_div(2).floor_div(2).to_rust(&var), "(1i64 + d_h.div_euclid(2)).div_euclid(2).div_euclid(2)");
        assert_eq!(h.mul(&c(3)).to_rust(&var), "3i64 * d_h");
        for (e, want) in [("d_h", "d_h"), ("sz[0]", "sz[0]"), ("(a + b)", "(a + b)"), ("(a) + (b)", "((a) + (b))"), ("-3i64", "(-3i64)"), ("a * b", "(a * b)"), ("(a + b).f(2)", "(a + b).f(2)"), ("x as i64", "(x as i64)")] {
            assert_eq!(rust_operand(e.to_string()), want);
        }
        // Evaluated the Rust way, the expression agrees with the analysis at every size.
        let e = c(1).add(&h.floor_div(2)).floor_div(2).sub(&h).add(&c(-7));
        for v in 0..20i64 {
            let d_h = v;
            let rust = (1i64 + d_h.div_euclid(2)).div_euclid(2) + -1i64 * d_h + -7i64;
            assert_eq!(e.eval(&|_| Some(v)), Some(rust), "{}", e.to_rust(&var));
        }
    }
}
