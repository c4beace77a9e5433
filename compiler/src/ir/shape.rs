//! Shapes: fixed dims and symbolic dims (named, optionally bounded).
use super::DimExpr;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(usize),
    /// A dim known only by name until pinned; memory is planned for `bound` when given.
    Sym { name: String, bound: Option<usize> },
}

impl Dim {
    pub fn fixed(&self) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Sym { .. } => None,
        }
    }

    /// The dim as a dim expression: a constant, or the variable of its name.
    pub fn expr(&self) -> DimExpr {
        match self {
            Dim::Fixed(n) => DimExpr::constant(*n as i64),
            Dim::Sym { name, .. } => DimExpr::var(name),
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Sym { name, bound: None } => write!(f, "{name}"),
            Dim::Sym { name, bound: Some(b) } => write!(f, "{{{name}<={b}}}"),
        }
    }
}

/// A shape of known rank. Unknown rank is `Option<Shape>::None` at the use site.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    pub fn fixed(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Fixed(d)).collect())
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// All dims fixed: the concrete shape.
    pub fn as_fixed(&self) -> Option<Vec<usize>> {
        self.0.iter().map(Dim::fixed).collect()
    }

    /// Element count when every dim is fixed (None too when it overflows).
    pub fn numel(&self) -> Option<usize> {
        self.as_fixed().and_then(|d| crate::size::numel(&d))
    }

    /// Element count with symbolic dims at their bounds (for memory planning).
    pub fn numel_bound(&self) -> Option<usize> {
        self.0
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Sym { bound, .. } => *bound,
            })
            .try_fold(1usize, |a, d| a.checked_mul(d?))
    }

    /// The dims with symbolic ones at their bounds, when every dim is fixed or bounded.
    pub fn at_bounds(&self) -> Option<Vec<usize>> {
        self.0
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Sym { bound, .. } => *bound,
            })
            .collect()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
