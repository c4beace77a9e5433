//! Einsum's output shape from its equation: every label's dim from the inputs that carry it,
//! `...` dims broadcast across inputs; the output lists its labels (explicit `->`), or, implicit,
//! the broadcast `...` dims then the labels used once, in ASCII order (numpy's rule).
use super::{bcast, t, unify, Cx, R};
use crate::ir::{Dim, ValueType};
use std::collections::BTreeMap;

/// One term of the equation: labels, with the position of `...` among them.
struct Term {
    labels: Vec<char>,
    ellipsis: Option<usize>,
}

fn term(s: &str) -> R<Term> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("...") {
            if ellipsis.is_some() {
                return Err(format!("`{s}` has two ellipses"));
            }
            ellipsis = Some(labels.len());
            rest = &rest[3..];
        } else if c.is_ascii_alphabetic() {
            labels.push(c);
            rest = &rest[1..];
        } else {
            return Err(format!("`{c}` is not a label in `{s}`"));
        }
    }
    Ok(Term { labels, ellipsis })
}

pub(super) fn infer(cx: &Cx, equation: &str) -> R<Vec<ValueType>> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Term> = lhs.split(',').map(term).collect::<R<_>>()?;
    if terms.len() != cx.n.inputs.len() {
        return Err(format!("equation `{equation}` has {} inputs, the node {}", terms.len(), cx.n.inputs.len()));
    }
    let mut shapes = Vec::new();
    for i in 0..terms.len() {
        match cx.shape(i) {
            Some(s) => shapes.push(s),
            None => return Ok(vec![t(cx.dtype(0), None)]),
        }
    }
    let mut dims: BTreeMap<char, Dim> = BTreeMap::new();
    let mut uses: BTreeMap<char, usize> = BTreeMap::new();
    let mut ell: Vec<Dim> = Vec::new();
    for (k, (tm, shape)) in terms.iter().zip(&shapes).enumerate() {
        let n_ell = match tm.ellipsis {
            Some(_) if shape.len() >= tm.labels.len() => shape.len() - tm.labels.len(),
            None if shape.len() == tm.labels.len() => 0,
            _ => return Err(format!("input {k} has rank {} but `{equation}` gives it {} labels", shape.len(), tm.labels.len())),
        };
        let at = tm.ellipsis.unwrap_or(tm.labels.len());
        for (j, &c) in tm.labels.iter().enumerate() {
            let d = &shape[if j < at { j } else { j + n_ell }];
            let d = match dims.get(&c) {
                Some(prev) => unify(prev, d, &format!("label `{c}` of `{equation}` has two sizes"))?,
                None => d.clone(),
            };
            dims.insert(c, d);
            *uses.entry(c).or_default() += 1;
        }
        if tm.ellipsis.is_some() {
            ell = bcast(cx, &ell, &shape[at..at + n_ell])?;
        }
    }
    let out: Vec<Dim> = match rhs {
        Some(r) => {
            let tm = term(r)?;
            let mut out = Vec::new();
            for (j, c) in tm.labels.iter().enumerate() {
                if tm.ellipsis == Some(j) {
                    out.extend(ell.iter().cloned());
                }
                out.push(dims.get(c).cloned().ok_or_else(|| format!("output label `{c}` of `{equation}` is on no input"))?);
            }
            if tm.ellipsis == Some(tm.labels.len()) {
                out.extend(ell.iter().cloned());
            }
            out
        }
        None => ell.iter().cloned().chain(uses.iter().filter(|(_, &n)| n == 1).map(|(c, _)| dims[c].clone())).collect(),
    };
    Ok(vec![t(cx.dtype(0), Some(out))])
}
