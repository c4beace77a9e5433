//! The loss/accuracy curve as a small SVG (no plotting crate): training loss on the left axis,
//! train and test accuracy on the right, one point per epoch, a dashed line where fine-tuning
//! starts.

pub struct Epoch {
    pub loss: f64,
    pub train_acc: f64,
    pub test_acc: f64,
}

pub fn svg(epochs: &[Epoch], finetune_from: usize) -> String {
    let (w, h, l, r, t, b) = (720.0, 360.0, 60.0, 60.0, 30.0, 40.0);
    let n = epochs.len().max(2) as f64;
    let max_loss = epochs.iter().map(|e| e.loss).fold(1e-9, f64::max);
    let x = |i: usize| l + (w - l - r) * i as f64 / (n - 1.0);
    let y_loss = |v: f64| t + (h - t - b) * (1.0 - v / max_loss);
    let y_acc = |v: f64| t + (h - t - b) * (1.0 - v);
    let line = |f: &dyn Fn(&Epoch) -> f64, y: &dyn Fn(f64) -> f64| -> String {
        epochs.iter().enumerate().map(|(i, e)| format!("{:.1},{:.1}", x(i), y(f(e)))).collect::<Vec<_>>().join(" ")
    };
    let mut s = format!(r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"##);
    s += &format!(r##"<rect width="{w}" height="{h}" fill="white"/><rect x="{l}" y="{t}" width="{}" height="{}" fill="none" stroke="#888"/>"##, w - l - r, h - t - b);
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        s += &format!(r##"<text x="{}" y="{:.1}" text-anchor="end">{:.2}</text>"##, l - 6.0, y_loss(max_loss * f) + 4.0, max_loss * f);
        s += &format!(r##"<text x="{}" y="{:.1}">{:.2}</text>"##, w - r + 6.0, y_acc(f) + 4.0, f);
    }
    if finetune_from > 0 && finetune_from < epochs.len() {
        let fx = (x(finetune_from - 1) + x(finetune_from)) / 2.0;
        s += &format!(r##"<line x1="{fx:.1}" y1="{t}" x2="{fx:.1}" y2="{}" stroke="#999" stroke-dasharray="4 4"/><text x="{:.1}" y="{}">fine-tune fc2 (remapped labels)</text>"##, h - b, fx + 4.0, t + 14.0);
    }
    s += &format!(r##"<polyline fill="none" stroke="#d62728" stroke-width="2" points="{}"/>"##, line(&|e| e.loss, &y_loss));
    s += &format!(r##"<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{}"/>"##, line(&|e| e.train_acc, &y_acc));
    s += &format!(r##"<polyline fill="none" stroke="#2ca02c" stroke-width="2" points="{}"/>"##, line(&|e| e.test_acc, &y_acc));
    s += &format!(r##"<text x="{l}" y="{}">epoch →</text>"##, h - 12.0);
    s += &format!(r##"<text x="{}" y="18" fill="#d62728">train loss</text><text x="{}" y="18" fill="#1f77b4">train accuracy</text><text x="{}" y="18" fill="#2ca02c">test accuracy</text>"##, l, l + 90.0, l + 210.0);
    s += "</svg>\n";
    s
}
