//! The memory plan as a picture (`burnc inspect MODEL --svg plan.svg`): one box per buffer or
//! scratch area, spanning the schedule steps it is live over (x) at its arena offset (y,
//! address 0 at the bottom), the arena's size and the step of peak live bytes marked. For a
//! person sizing a microcontroller's RAM: what is live at the peak, and where the arena is
//! larger than the bytes live at once (fragmentation).
use crate::ir::Graph;
use crate::memory::MemoryPlan;
use std::fmt::Write;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 110.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const RIGHT: f64 = 30.0;

/// Text for an SVG element or attribute.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // XML 1.0 allows no other control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

/// Bytes with a binary unit, for axis labels.
fn human(b: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// The step with the most bytes live (first such), and those bytes.
fn peak(plan: &MemoryPlan, steps: usize) -> (usize, usize) {
    let mut live = vec![0usize; steps + 1];
    for b in &plan.blocks {
        for l in &mut live[b.start..=b.end.min(steps)] {
            *l = l.saturating_add(b.bytes);
        }
    }
    live.iter().copied().enumerate().max_by_key(|&(s, l)| (l, std::cmp::Reverse(s))).unwrap_or((0, 0))
}

/// The SVG document for `plan` over graph `g` (node names for the peak's label).
pub fn render(g: &Graph, plan: &MemoryPlan, title: &str) -> String {
    let steps = plan.order.len().max(1);
    let arena = plan.arena_bytes.max(1);
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |s: usize| LEFT + pw * s as f64 / steps as f64;
    let y = |off: usize| TOP + ph - ph * off as f64 / arena as f64;
    let mut o = String::new();
    let _ = writeln!(o, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#);
    let _ = writeln!(o, r#"<title>{}</title>"#, xml(title));
    let _ = writeln!(o, r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="14">{}: arena {} ({} bytes), {} live at most; {} buffers over {} steps</text>"#,
        xml(title),
        human(plan.arena_bytes),
        plan.arena_bytes,
        human(plan.lower_bound_bytes),
        plan.blocks.len(),
        plan.order.len()
    );
    // Plot frame and offset ticks.
    let _ = writeln!(o, r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#f7f7f7" stroke="#999"/>"##);
    for k in 0..=4 {
        let off = arena * k / 4;
        let yy = y(off);
        let _ = writeln!(o, r##"<line x1="{}" y1="{yy:.1}" x2="{LEFT}" y2="{yy:.1}" stroke="#999"/>"##, LEFT - 5.0);
        let _ = writeln!(o, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, LEFT - 8.0, yy + 4.0, xml(&human(off)));
    }
    let _ = writeln!(o, r#"<text x="{}" y="{}" text-anchor="middle">schedule step (node order)</text>"#, LEFT + pw / 2.0, HEIGHT - 15.0);
    let _ = writeln!(o, r#"<text x="20" y="{}" transform="rotate(-90 20 {})" text-anchor="middle">arena offset</text>"#, TOP + ph / 2.0, TOP + ph / 2.0);
    // Buffers: one hue per block, so neighbours differ.
    for (k, b) in plan.blocks.iter().enumerate() {
        let (x0, x1) = (x(b.start), x(b.end + 1));
        let (y0, y1) = (y(b.offset + b.bytes), y(b.offset));
        let hue = (k * 137) % 360;
        let _ = writeln!(
            o,
            r##"<rect class="buffer" x="{x0:.2}" y="{y0:.2}" width="{:.2}" height="{:.2}" fill="hsl({hue},60%,70%)" stroke="#333" stroke-width="0.5"><title>{}: {} bytes at offset {}, steps {}..={}</title></rect>"##,
            (x1 - x0).max(0.5),
            (y1 - y0).max(0.5),
            xml(&b.what),
            b.bytes,
            b.offset,
            b.start,
            b.end
        );
    }
    // The peak: a line over the step with the most bytes live, and its node.
    let (ps, pb) = peak(plan, plan.order.len().saturating_sub(1));
    let px = (x(ps) + x(ps + 1)) / 2.0;
    let node = plan.order.get(ps).map(|&n| g.node(n).name.clone()).unwrap_or_default();
    let _ = writeln!(o, r##"<line class="peak" x1="{px:.2}" y1="{TOP}" x2="{px:.2}" y2="{}" stroke="#c00" stroke-width="1.5" stroke-dasharray="6 3"/>"##, TOP + ph);
    let _ = writeln!(o, r##"<text x="{px:.2}" y="{}" fill="#c00" text-anchor="middle">peak {} live at step {ps} (`{}`)</text>"##, TOP - 6.0, xml(&human(pb)), xml(&node));
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Block;

    fn plan(blocks: Vec<Block>, steps: usize, arena: usize) -> MemoryPlan {
        MemoryPlan {
            order: (0..steps).map(|i| crate::ir::NodeId(i as u32)).collect(),
            slots: Default::default(),
            scratch: Default::default(),
            inplace: Default::default(),
            aliases: Default::default(),
            placed: Default::default(),
            arena_bytes: arena,
            lower_bound_bytes: arena,
            total_buffer_bytes: arena,
            weights_bytes: 0,
            blocks,
        }
    }

    #[test]
    fn boxes_peak_and_escaped_names() {
        let mut g = Graph::default();
        for i in 0..3 {
            g.add_node(format!("n{i}"), crate::ir::Op::Unary(crate::ir::UnaryOp::Relu), vec![], &[format!("v{i}")]);
        }
        let blocks = vec![
            Block { start: 0, end: 1, offset: 0, bytes: 64, what: "a<&>\"'\u{1}".into() },
            Block { start: 1, end: 2, offset: 64, bytes: 128, what: "b".into() },
            Block { start: 2, end: 2, offset: 0, bytes: 64, what: "scratch of n2".into() },
        ];
        let svg = render(&g, &plan(blocks, 3, 192), "model");
        assert_eq!(svg.matches(r#"class="buffer""#).count(), 3);
        assert!(svg.contains("a&lt;&amp;&gt;&quot;&apos;\u{FFFD}: 64 bytes at offset 0, steps 0..=1"), "{svg}");
        // Step 1 holds a and b (192 bytes), step 2 b and the scratch (192): the first wins.
        assert!(svg.contains("peak 192 B live at step 1 (`n1`)"), "{svg}");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
