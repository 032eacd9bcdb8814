//! Hand-written SVG charts for the HTML report.
//!
//! Hand-written rather than a plotting crate: the charts need only lines,
//! markers, bars, axes and a legend, the output must be byte-stable for
//! snapshot tests, and it keeps the build free of font and image stacks.
//! Text uses generic font families so the page renders without any font
//! file or network access.

use std::fmt::Write;

use super::charts::{Chart, ChartKind, Series, SeriesStyle};

/// Series colours (Tableau 10), indexed by the series' colour slot.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// Width of a chart whose legend names fit the narrowest legend.
const W: f64 = 540.0;
const LEFT: f64 = 62.0;
const TOP: f64 = 44.0;
/// The narrowest legend; a longer name widens the chart, never cut.
const LEGEND_W: f64 = 168.0;
/// Widest legend, for names no one can read anyway.
const LEGEND_W_MAX: f64 = 420.0;
/// Width of one legend character at the 11px sans-serif legend font, a
/// generous average so a name is never cut.
const LEGEND_CHAR_W: f64 = 6.8;
/// Marker shapes, one per round of the palette: series beyond the
/// palette's colours stay distinct by their shape.
const SHAPES: usize = 4;

/// Escape text for XML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Tick positions covering `[lo, hi]` at a 1/2/5 × 10^k step.
fn ticks(lo: f64, hi: f64) -> (Vec<f64>, f64) {
    let range = (hi - lo).max(1e-12);
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| range / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut t = first;
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    (out, step)
}

fn tick_text(v: f64, step: f64) -> String {
    if step >= 1.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        let d = (-step.log10()).ceil().max(0.0) as usize;
        format!("{v:.d$}")
    }
}

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// A series' marker at (`cx`, `cy`) of radius `r`: a circle, square,
/// triangle or diamond by its colour slot's round of the palette.
fn marker(slot: usize, cx: f64, cy: f64, r: f64, fill: &str, inner: &str) -> String {
    match (slot / PALETTE.len()) % SHAPES {
        0 => format!(r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{fill}">{inner}</circle>"#),
        1 => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}">{inner}</rect>"#,
            cx - r,
            cy - r,
            2.0 * r,
            2.0 * r
        ),
        2 => format!(
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{fill}">{inner}</polygon>"#,
            cx,
            cy - 1.2 * r,
            cx + 1.1 * r,
            cy + 0.9 * r,
            cx - 1.1 * r,
            cy + 0.9 * r
        ),
        _ => format!(
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{fill}">{inner}</polygon>"#,
            cx,
            cy - 1.3 * r,
            cx + 1.3 * r,
            cy,
            cx,
            cy + 1.3 * r,
            cx - 1.3 * r,
            cy
        ),
    }
}

/// Legend width that holds the longest series name.
fn legend_width(chart: &Chart) -> f64 {
    let longest = chart
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0) as f64;
    (38.0 + longest * LEGEND_CHAR_W).clamp(LEGEND_W, LEGEND_W_MAX)
}

/// Draw one chart as a standalone `<svg>` element.
pub fn render(chart: &Chart) -> String {
    let bars = matches!(chart.kind, ChartKind::Bars { .. });
    let height = if bars { 430.0 } else { 370.0 };
    let bottom = if bars { 130.0 } else { 58.0 };
    // Rotated group labels hang to the left of their bar: give them room.
    let left = if bars { 104.0 } else { LEFT };
    let pw = W - left - LEGEND_W;
    let legend_w = legend_width(chart);
    let w = left + pw + legend_w;
    let ph = height - TOP - bottom;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {w} {height}" width="{w}" height="{height}" role="img" aria-label="{}">"#,
        esc(&chart.title)
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{height}" fill="#ffffff"/><text x="{}" y="24" class="title" text-anchor="middle">{}</text>"##,
        w / 2.0,
        esc(&chart.title)
    );
    let all: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" class="empty">no usable measurement to draw</text></svg>"#,
            w / 2.0,
            height / 2.0
        );
        return s;
    }
    let reference = match &chart.kind {
        ChartKind::Bars { reference, .. } => *reference,
        ChartKind::Line { .. } => None,
    };
    let ymax = all
        .iter()
        .map(|p| p.1)
        .chain(reference)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.08;
    let ymin = all.iter().map(|p| p.1).fold(0.0f64, f64::min);
    let (yt, ystep) = ticks(ymin, ymax);
    let ytop = yt.last().copied().unwrap_or(ymax).max(ymax);
    let f = Frame {
        left,
        pw,
        ph,
        ymin,
        ytop,
    };
    f.axes(&mut s, chart, height, &yt, ystep);
    match &chart.kind {
        ChartKind::Bars { groups, .. } => f.bars(&mut s, chart, groups, reference),
        ChartKind::Line { log_x } => f.lines(&mut s, chart, &all, *log_x),
    }
    f.legend(&mut s, chart, bars);
    s.push_str("</svg>");
    s
}

/// Where a chart's plot area lies and how values map onto it.
struct Frame {
    left: f64,
    pw: f64,
    ph: f64,
    ymin: f64,
    ytop: f64,
}

impl Frame {
    fn y(&self, v: f64) -> f64 {
        TOP + self.ph - (v - self.ymin) / (self.ytop - self.ymin) * self.ph
    }

    /// The frame, the horizontal grid with its ticks and both axis labels.
    fn axes(&self, s: &mut String, chart: &Chart, height: f64, yt: &[f64], ystep: f64) {
        let (left, pw, ph) = (self.left, self.pw, self.ph);
        let y = |v: f64| self.y(v);
        for t in yt {
            let _ = write!(
                s,
                r##"<line x1="{left}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#e3e3e3"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"##,
                left + pw,
                y(*t),
                y(*t),
                left - 6.0,
                y(*t) + 4.0,
                tick_text(*t, ystep)
            );
        }
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{left}" y1="{TOP}" y2="{:.1}" stroke="#333"/><line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/>"##,
            TOP + ph,
            left + pw,
            TOP + ph,
            TOP + ph
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text><text transform="translate(16 {:.1}) rotate(-90)" class="axis" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            height - 10.0,
            esc(&chart.x_label),
            TOP + ph / 2.0,
            esc(&chart.y_label)
        );
    }

    /// Bars per group and series, and the reference line.
    fn bars(&self, s: &mut String, chart: &Chart, groups: &[String], reference: Option<f64>) {
        let (left, pw, ph, ymin) = (self.left, self.pw, self.ph, self.ymin);
        let y = |v: f64| self.y(v);
        let n = chart.series.len().max(1) as f64;
        let gw = pw / groups.len().max(1) as f64;
        let bw = gw * 0.8 / n;
        for (gi, g) in groups.iter().enumerate() {
            let cx = left + gw * (gi as f64 + 0.5);
            let _ = write!(
                s,
                r#"<text transform="translate({:.1} {:.1}) rotate(-40)" class="tick" text-anchor="end">{}</text>"#,
                cx,
                TOP + ph + 14.0,
                esc(g)
            );
        }
        for (si, ser) in chart.series.iter().enumerate() {
            for &(gx, v) in &ser.points {
                let x0 = left + gw * gx + gw * 0.1 + bw * si as f64;
                let (top, bot) = (y(v.max(ymin)), y(0.0f64.max(ymin)));
                let _ = write!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {:.3}</title></rect>"#,
                    x0,
                    top.min(bot),
                    bw.max(1.0),
                    (bot - top).abs(),
                    color(ser.color),
                    esc(&ser.name),
                    v
                );
            }
        }
        if let Some(r) = reference {
            let _ = write!(
                s,
                r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">baseline = {}</text>"##,
                left + pw,
                y(r),
                y(r),
                left + pw - 4.0,
                y(r) - 4.0,
                tick_text(r, 0.1)
            );
        }
    }

    /// Lines, markers and the frontier over an x axis of their values.
    fn lines(&self, s: &mut String, chart: &Chart, all: &[(f64, f64)], log_x: bool) {
        let (left, pw, ph) = (self.left, self.pw, self.ph);
        let y = |v: f64| self.y(v);
        let log_x = log_x && all.iter().all(|p| p.0 > 0.0);
        let fx = |v: f64| if log_x { v.log2() } else { v };
        let (mut xlo, mut xhi) = all
            .iter()
            .map(|p| fx(p.0))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        // One x value: a point at its own value, centred, with one tick.
        let single = xhi - xlo < 1e-9;
        if single {
            xlo -= 1.0;
            xhi += 1.0;
        }
        let pad = (xhi - xlo) * 0.05;
        let (xlo, xhi) = (xlo - pad, xhi + pad);
        let x = |v: f64| left + (fx(v) - xlo) / (xhi - xlo) * pw;
        let xt: Vec<(f64, String)> = if single {
            let v = all[0].0;
            let label = if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            };
            vec![(v, label)]
        } else if log_x {
            let mut v: Vec<f64> = all.iter().map(|p| p.0).collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v.into_iter().map(|t| (t, tick_text(t, 1.0))).collect()
        } else {
            let (t, step) = ticks(xlo, xhi);
            t.into_iter().map(|v| (v, tick_text(v, step))).collect()
        };
        for (t, label) in &xt {
            let _ = write!(
                s,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"##,
                x(*t),
                x(*t),
                TOP + ph,
                TOP + ph + 5.0,
                x(*t),
                TOP + ph + 18.0,
                label
            );
        }
        // Frontier first so the markers sit on top of it.
        let mut order: Vec<&Series> = chart.series.iter().collect();
        order.sort_by_key(|s| s.style != SeriesStyle::Frontier);
        for ser in order {
            let c = if ser.style == SeriesStyle::Frontier {
                "#222"
            } else {
                color(ser.color)
            };
            if ser.style != SeriesStyle::Markers && ser.points.len() > 1 {
                let d: Vec<String> = ser
                    .points
                    .iter()
                    .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
                    .collect();
                let (width, dash) = match ser.style {
                    SeriesStyle::Dashed => (2.0, r#" stroke-dasharray="6 4""#),
                    SeriesStyle::Frontier => (1.5, r#" stroke-dasharray="3 3""#),
                    _ => (2.0, ""),
                };
                let _ = write!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="{width}"{dash}/>"#,
                    d.join(" ")
                );
            }
            for (i, p) in ser.points.iter().enumerate() {
                if ser.style == SeriesStyle::Frontier {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="7" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
                        x(p.0),
                        y(p.1)
                    );
                    continue;
                }
                s.push_str(&marker(
                    ser.color,
                    x(p.0),
                    y(p.1),
                    3.5,
                    c,
                    &format!(
                        "<title>{}: ({:.3}, {:.3})</title>",
                        esc(&ser.name),
                        p.0,
                        p.1
                    ),
                ));
                if let Some(l) = ser.labels.get(i) {
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" class="pt">{}</text>"#,
                        x(p.0) + 6.0,
                        y(p.1) - 5.0,
                        esc(l)
                    );
                }
            }
        }
    }

    /// One legend line per series, beside the plot.
    fn legend(&self, s: &mut String, chart: &Chart, bars: bool) {
        let (left, pw) = (self.left, self.pw);
        let lx = left + pw + 14.0;
        for (i, ser) in chart.series.iter().enumerate() {
            let ly = TOP + 8.0 + i as f64 * 18.0;
            let c = if ser.style == SeriesStyle::Frontier {
                "#222"
            } else {
                color(ser.color)
            };
            let sym = match (bars, ser.style) {
                (true, _) => format!(
                    r#"<rect x="{lx}" y="{:.1}" width="14" height="10" fill="{c}"/>"#,
                    ly - 5.0
                ),
                (_, SeriesStyle::Dashed) => format!(
                    r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2" stroke-dasharray="6 4"/>"#,
                    lx + 18.0
                ),
                (_, SeriesStyle::Frontier) => format!(
                    r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="1.5" stroke-dasharray="3 3"/><circle cx="{}" cy="{ly}" r="5" fill="none" stroke="{c}"/>"#,
                    lx + 18.0,
                    lx + 9.0
                ),
                (_, SeriesStyle::Markers) => marker(ser.color, lx + 9.0, ly, 4.0, c, ""),
                (_, SeriesStyle::Line) => format!(
                    r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"/>{}"#,
                    lx + 18.0,
                    marker(ser.color, lx + 9.0, ly, 3.0, c, "")
                ),
            };
            let _ = write!(
                s,
                r#"{sym}<text x="{}" y="{:.1}" class="legend">{}</text>"#,
                lx + 24.0,
                ly + 4.0,
                esc(&ser.name)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::ChartSection;

    #[test]
    fn ticks_use_round_steps_and_cover_the_range() {
        let (t, step) = ticks(0.0, 1080.0);
        assert_eq!(step, 200.0);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(t.last(), Some(&1000.0));
        let (t, step) = ticks(0.0, 1.1);
        assert!((step - 0.2).abs() < 1e-12);
        assert_eq!(tick_text(t[3], step), "0.6");
    }

    #[test]
    fn one_x_value_is_one_point_at_its_own_labelled_value() {
        for log_x in [false, true] {
            let chart = Chart {
                section: ChartSection::Throughput,
                title: "kinds".into(),
                x_label: "concurrency".into(),
                y_label: "tok/s".into(),
                kind: ChartKind::Line { log_x },
                series: vec![Series {
                    name: "a".into(),
                    color: 0,
                    style: SeriesStyle::Line,
                    points: vec![(4.0, 10.0)],
                    labels: Vec::new(),
                }],
            };
            let svg = render(&chart);
            let ticks: Vec<&str> = svg
                .split(r#"class="tick" text-anchor="middle">"#)
                .skip(1)
                .map(|t| t.split('<').next().unwrap())
                .collect();
            assert_eq!(ticks, ["4"], "log_x={log_x}: {svg}");
            // The tick and the point sit in the middle of the plot area.
            let mid = LEFT + (W - LEFT - LEGEND_W) / 2.0;
            assert!(svg.contains(&format!(r#"cx="{mid:.1}""#)), "{svg}");
            assert!(svg.contains(&format!(r#"<line x1="{mid:.1}" x2="{mid:.1}""#)));
            assert!(!svg.contains(">3.0<") && !svg.contains(">5.0<"));
        }
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
