//! Optimizer updates, in place over a parameter and its moment buffers, with PyTorch's
//! semantics and order of operations (`torch.optim.SGD` / `Adam` / `AdamW`, single-tensor
//! path), so a step here can be checked against a PyTorch or numpy reference to rounding.

/// An update rule and its hyper-parameters (the learning rate comes per step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// SGD; with `momentum` > 0 one buffer (initialised to the first step's gradient).
    Sgd { momentum: f32, dampening: f32, nesterov: bool, weight_decay: f32 },
    /// Adam; `decoupled` is AdamW (decay applied to the weights, not added to the gradient).
    Adam { beta1: f32, beta2: f32, eps: f32, weight_decay: f32, decoupled: bool },
}

impl Rule {
    /// Moment buffers the rule keeps per parameter, each the parameter's size.
    pub const fn moments(&self) -> usize {
        match self {
            Rule::Sgd { momentum, .. } => {
                if *momentum != 0.0 {
                    1
                } else {
                    0
                }
            }
            Rule::Adam { .. } => 2,
        }
    }
}

/// `b^t` in f64, as Python computes `beta ** step`.
fn powi(b: f64, mut t: u64) -> f64 {
    let (mut acc, mut base) = (1.0f64, b);
    while t > 0 {
        if t & 1 == 1 {
            acc *= base;
        }
        base *= base;
        t >>= 1;
    }
    acc
}

/// One update of `p` from its gradient `g` at step `t` (1 for the first step) with learning
/// rate `lr`. `m1`/`m2` are the rule's moment buffers ([`Rule::moments`] of them; pass empty
/// slices for the others). Lengths must match `p`; extra elements are left alone.
pub fn step(rule: &Rule, p: &mut [f32], g: &[f32], m1: &mut [f32], m2: &mut [f32], lr: f32, t: u64) {
    let n = p.len().min(g.len());
    match *rule {
        Rule::Sgd { momentum, dampening, nesterov, weight_decay } => {
            let with_buf = momentum != 0.0 && m1.len() >= n;
            for i in 0..n {
                let mut d = g[i];
                if weight_decay != 0.0 {
                    d += weight_decay * p[i];
                }
                if with_buf {
                    let b = if t <= 1 { d } else { m1[i] * momentum + (1.0 - dampening) * d };
                    m1[i] = b;
                    d = if nesterov { d + momentum * b } else { b };
                }
                p[i] += -lr * d;
            }
        }
        Rule::Adam { beta1, beta2, eps, weight_decay, decoupled } => {
            if m1.len() < n || m2.len() < n {
                return;
            }
            let t = t.max(1);
            let bc1 = 1.0 - powi(beta1 as f64, t);
            let bc2 = 1.0 - powi(beta2 as f64, t);
            let step_size = (lr as f64 / bc1) as f32;
            let bc2_sqrt = libm::sqrt(bc2) as f32;
            let w1 = 1.0 - beta1;
            let decay = 1.0 - lr * weight_decay;
            for i in 0..n {
                let mut d = g[i];
                if weight_decay != 0.0 {
                    if decoupled {
                        p[i] *= decay;
                    } else {
                        d += weight_decay * p[i];
                    }
                }
                // torch.lerp(m, d, w1): m + w1·(d − m) for w1 < 0.5, else d − (d − m)·(1 − w1).
                m1[i] = if w1 < 0.5 { m1[i] + w1 * (d - m1[i]) } else { d - (d - m1[i]) * (1.0 - w1) };
                m2[i] = m2[i] * beta2 + (1.0 - beta2) * (d * d);
                let denom = libm::sqrtf(m2[i]) / bc2_sqrt + eps;
                p[i] += -step_size * (m1[i] / denom);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgd_momentum_starts_from_the_gradient() {
        let r = Rule::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 0.0 };
        let (mut p, mut b) = ([1.0f32, 2.0], [0.0f32; 2]);
        step(&r, &mut p, &[0.5, -1.0], &mut b, &mut [], 0.1, 1);
        assert_eq!(p, [0.95, 2.1]);
        assert_eq!(b, [0.5, -1.0]);
        step(&r, &mut p, &[0.5, -1.0], &mut b, &mut [], 0.1, 2);
        // buf = 0.9·0.5 + 0.5 = 0.95
        assert!((p[0] - (0.95 - 0.095)).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn adam_first_step_moves_by_lr() {
        // With bias correction the first step is lr·g/(|g| + eps') ≈ lr·sign(g).
        let r = Rule::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: false };
        let (mut p, mut m, mut v) = ([1.0f32, -1.0], [0.0f32; 2], [0.0f32; 2]);
        step(&r, &mut p, &[3.0, -0.01], &mut m, &mut v, 0.01, 1);
        assert!((p[0] - 0.99).abs() < 1e-6 && (p[1] + 0.99).abs() < 1e-5, "{p:?}");
    }

    #[test]
    fn adamw_decays_the_weights() {
        let r = Rule::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.5, decoupled: true };
        let (mut p, mut m, mut v) = ([2.0f32], [0.0f32], [0.0f32]);
        step(&r, &mut p, &[0.0], &mut m, &mut v, 0.1, 1);
        assert!((p[0] - 2.0 * 0.95).abs() < 1e-6, "{p:?}");
    }
}
