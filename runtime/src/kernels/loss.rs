//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over an `[n, c, d]` view (classes on
//! the middle axis). Arithmetic in f64; results rounded once to the working type.
use super::real::Real;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reduction {
    None,
    Sum,
    Mean,
}

/// `loss[i, k] = -x[i, target[i, k], k] * weight[target[i, k]]` (zero where the target is
/// `ignore`), reduced per `reduction` into `loss` (`n * d` elements for `None`, else one).
/// With `softmax`, `x` holds scores and LogSoftmax over the class axis comes first; the
/// log-probabilities go to `log_prob` when given. Returns the first out-of-range target as
/// an error (outputs are then incomplete).
#[allow(clippy::too_many_arguments)]
pub fn nll_loss<R: Real, T: Copy + Into<i64>>(
    x: &[R],
    target: &[T],
    weight: Option<&[R]>,
    n: usize,
    c: usize,
    d: usize,
    softmax: bool,
    ignore: Option<i64>,
    reduction: Reduction,
    loss: &mut [R],
    mut log_prob: Option<&mut [R]>,
) -> Result<(), i64> {
    let (mut total, mut wsum) = (0.0f64, 0.0f64);
    for i in 0..n {
        for k in 0..d {
            let at = |j: usize| (i * c + j) * d + k;
            // log-sum-exp over the classes (0 when the input already holds log-probabilities).
            let lse = if softmax && c > 0 {
                let mx = (0..c).map(|j| x[at(j)].to_f64()).fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..c).map(|j| crate::math::exp(x[at(j)].to_f64() - mx)).sum();
                let lse = mx + crate::math::log(s);
                if let Some(lp) = log_prob.as_deref_mut() {
                    for j in 0..c {
                        lp[at(j)] = R::from_f64(x[at(j)].to_f64() - lse);
                    }
                }
                lse
            } else {
                0.0
            };
            let tv: i64 = target[i * d + k].into();
            let (l, w) = if Some(tv) == ignore {
                (0.0, 0.0)
            } else {
                if tv < 0 || tv as usize >= c {
                    return Err(tv);
                }
                let w = weight.map_or(1.0, |w| w[tv as usize].to_f64());
                (-(x[at(tv as usize)].to_f64() - lse) * w, w)
            };
            total += l;
            wsum += w;
            if reduction == Reduction::None {
                loss[i * d + k] = R::from_f64(l);
            }
        }
    }
    match reduction {
        Reduction::None => {}
        Reduction::Sum => loss[0] = R::from_f64(total),
        Reduction::Mean => {
            let denom = if weight.is_some() || ignore.is_some() { wsum } else { (n * d) as f64 };
            loss[0] = R::from_f64(total / denom);
        }
    }
    Ok(())
}
