//! Hand-written log-log scaling plot (SVG): time per call against N, one line per series, with
//! decade ticks and the fitted model drawn dotted.

use crate::analysis::fit::ModelFit;

use super::fmt::{count_short, ns, ns_decade};
use super::xml::escape;

/// One line of the plot.
pub struct Series {
    pub label: String,
    /// (N, ns per call), any order; non-positive values are skipped.
    pub points: Vec<(f64, f64)>,
    /// The fitted model, drawn dotted over the points' N range.
    pub model: Option<ModelFit>,
    /// 0: solid; 1: dashed (the second data set of a comparison).
    pub style: usize,
}

const COLORS: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const PLOT_W: f64 = 460.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

fn decades(lo: f64, hi: f64) -> (i32, i32) {
    let a = lo.log10().floor() as i32;
    let mut b = hi.log10().ceil() as i32;
    if b <= a {
        b = a + 1;
    }
    (a, b)
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

/// The plot's frame: the decades each axis spans and where they are drawn.
struct Frame {
    /// First and last decade of N (10^xa .. 10^xb) and of the time (10^ya .. 10^yb).
    xa: i32,
    xb: i32,
    ya: i32,
    yb: i32,
    /// Left and right, bottom and top edges of the plot area, in pixels.
    px0: f64,
    px1: f64,
    py0: f64,
    py1: f64,
}

impl Frame {
    /// The frame of the decades around every point.
    fn around(all: &[(f64, f64)]) -> Frame {
        let (xmin, xmax) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| {
            (a.min(*x), b.max(*x))
        });
        let (ymin, ymax) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), (_, y)| {
            (a.min(*y), b.max(*y))
        });
        let (xa, xb) = decades(xmin, xmax);
        let (ya, yb) = decades(ymin, ymax);
        Frame {
            xa,
            xb,
            ya,
            yb,
            px0: LEFT,
            px1: LEFT + PLOT_W,
            py0: H - BOTTOM,
            py1: TOP,
        }
    }

    fn sx(&self, x: f64) -> f64 {
        self.px0 + (x.log10() - self.xa as f64) / (self.xb - self.xa) as f64 * (self.px1 - self.px0)
    }

    fn sy(&self, y: f64) -> f64 {
        self.py0 + (y.log10() - self.ya as f64) / (self.yb - self.ya) as f64 * (self.py1 - self.py0)
    }

    fn vline(&self, x: f64) -> String {
        format!(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n",
            f2(x),
            f2(self.py0),
            f2(self.py1)
        )
    }

    fn hline(&self, y: f64) -> String {
        format!(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>\n",
            f2(self.px0),
            f2(y),
            f2(self.px1)
        )
    }
}

/// The plot, or None when no series has a point.
pub fn loglog_svg(title: &str, y_label: &str, series: &[Series]) -> Option<String> {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    if all.is_empty() {
        return None;
    }
    let f = Frame::around(&all);
    // The legend sits right of the plot, as wide as its longest label (~7 px per character).
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    let w = (LEFT + PLOT_W + 60.0 + 7.0 * longest as f64).round();

    let mut s = String::new();
    s.push_str(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{H}\" viewBox=\"0 0 {w} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    ));
    s.push_str(&format!("<title>{}</title>\n", escape(title)));
    s.push_str(&format!(
        "<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{H}\" fill=\"white\"/>\n"
    ));
    s.push_str(&format!(
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        f2((f.px0 + f.px1) / 2.0),
        escape(title)
    ));
    grid(&f, &mut s);
    axes(&f, y_label, &mut s);
    for (i, se) in series.iter().enumerate() {
        series_lines(&f, i, se, &mut s);
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#666666\">dotted: fitted model</text>\n",
        f2(f.px1 + 15.0),
        f2(TOP + 10.0 + series.len() as f64 * 20.0 + 6.0)
    ));
    s.push_str("</svg>\n");
    Some(s)
}

/// Grid: minor lines at 2..9 × each decade, major lines at decades.
fn grid(f: &Frame, s: &mut String) {
    s.push_str("<g stroke=\"#eeeeee\" stroke-width=\"1\">\n");
    for d in f.xa..f.xb {
        for m in 2..10 {
            s.push_str(&f.vline(f.sx(m as f64 * 10f64.powi(d))));
        }
    }
    for d in f.ya..f.yb {
        for m in 2..10 {
            s.push_str(&f.hline(f.sy(m as f64 * 10f64.powi(d))));
        }
    }
    s.push_str("</g>\n<g stroke=\"#bbbbbb\" stroke-width=\"1\">\n");
    for d in f.xa..=f.xb {
        s.push_str(&f.vline(f.sx(10f64.powi(d))));
    }
    for d in f.ya..=f.yb {
        s.push_str(&f.hline(f.sy(10f64.powi(d))));
    }
    s.push_str("</g>\n");
}

/// The plot's border, the decades' ticks and labels, and the axis titles.
fn axes(f: &Frame, y_label: &str, s: &mut String) {
    let (px0, px1, py0, py1) = (f.px0, f.px1, f.py0, f.py1);
    s.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n",
        f2(px0),
        f2(py1),
        f2(px1 - px0),
        f2(py0 - py1)
    ));
    s.push_str("<g class=\"x-ticks\" text-anchor=\"middle\">\n");
    for d in f.xa..=f.xb {
        let x = f.sx(10f64.powi(d));
        s.push_str(&format!(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/><text x=\"{0}\" y=\"{3}\">{4}</text>\n",
            f2(x),
            f2(py0),
            f2(py0 + 5.0),
            f2(py0 + 19.0),
            escape(&count_short(10f64.powi(d)))
        ));
    }
    s.push_str("</g>\n<g class=\"y-ticks\" text-anchor=\"end\">\n");
    for d in f.ya..=f.yb {
        let y = f.sy(10f64.powi(d));
        s.push_str(&format!(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/><text x=\"{3}\" y=\"{4}\">{5}</text>\n",
            f2(px0 - 5.0),
            f2(y),
            f2(px0),
            f2(px0 - 8.0),
            f2(y + 4.0),
            escape(&ns_decade(d))
        ));
    }
    s.push_str("</g>\n");
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">N (log scale)</text>\n",
        f2((px0 + px1) / 2.0),
        f2(H - 18.0)
    ));
    s.push_str(&format!(
        "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">{1} (log scale)</text>\n",
        f2((py0 + py1) / 2.0),
        escape(y_label)
    ));
}

/// Series `i`: its line, its points (each with a tooltip), its fitted model dotted over its
/// N range, and its legend entry.
fn series_lines(f: &Frame, i: usize, se: &Series, s: &mut String) {
    let color = COLORS[i % COLORS.len()];
    let mut pts: Vec<(f64, f64)> = se
        .points
        .iter()
        .copied()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let dash = if se.style % 2 == 1 {
        " stroke-dasharray=\"8 4\""
    } else {
        ""
    };
    s.push_str(&format!(
        "<g class=\"series\" data-label=\"{}\">\n",
        escape(&se.label)
    ));
    if pts.len() > 1 {
        let path: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{},{}", f2(f.sx(*x)), f2(f.sy(*y))))
            .collect();
        s.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>\n",
            path.join(" ")
        ));
    }
    for (x, y) in &pts {
        s.push_str(&format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{color}\"><title>{}: N={} {}</title></circle>\n",
            f2(f.sx(*x)),
            f2(f.sy(*y)),
            escape(&se.label),
            count_short(*x),
            escape(&ns(*y))
        ));
    }
    if let (Some(m), Some(first), Some(last)) = (&se.model, pts.first(), pts.last()) {
        let (l0, l1) = (first.0.log10(), last.0.log10());
        let curve: Vec<String> = (0..=48)
            .map(|k| 10f64.powf(l0 + (l1 - l0) * k as f64 / 48.0))
            .map(|n| (n, m.eval(n)))
            .filter(|(_, y)| *y > 0.0)
            .map(|(n, y)| {
                // Keep the curve inside the frame.
                let yy = f.sy(y).clamp(f.py1, f.py0);
                format!("{},{}", f2(f.sx(n)), f2(yy))
            })
            .collect();
        if curve.len() > 1 {
            s.push_str(&format!(
                "<polyline class=\"fit\" points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1\" stroke-dasharray=\"2 3\"/>\n",
                curve.join(" ")
            ));
        }
    }
    s.push_str("</g>\n");
    let ly = TOP + 10.0 + i as f64 * 20.0;
    let lx = f.px1 + 15.0;
    s.push_str(&format!(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{3}\" y=\"{4}\">{5}</text>\n",
        f2(lx),
        f2(ly),
        f2(lx + 24.0),
        f2(lx + 30.0),
        f2(ly + 4.0),
        escape(&se.label)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::Complexity;
    use crate::render::xml::check_well_formed;

    #[test]
    fn plot_has_decades_lines_and_labels() {
        let series = vec![
            Series {
                label: "waitpid-pid · 5.10 <old>".into(),
                points: vec![
                    (10.0, 1050.0),
                    (100.0, 1500.0),
                    (1000.0, 6000.0),
                    (8000.0, 41_000.0),
                ],
                model: Some(ModelFit {
                    class: Complexity::Linear,
                    a: 1000.0,
                    b: 5.0,
                    b_ci95: None,
                    nrms: 0.0,
                }),
                style: 0,
            },
            Series {
                label: "waitpid-pid · 6.1".into(),
                points: vec![(10.0, 900.0), (8000.0, 950.0)],
                model: None,
                style: 1,
            },
        ];
        let svg = loglog_svg(
            "do_wait: on-CPU time per call",
            "on-CPU time per call",
            &series,
        )
        .unwrap();
        assert_eq!(check_well_formed(&svg), Ok("svg".to_string()));
        // x decades 10..10k, y decades 100ns..100µs.
        for label in [
            ">10<", ">100<", ">1k<", ">10k<", ">100ns<", ">1µs<", ">100µs<",
        ] {
            assert!(svg.contains(label), "missing tick {label}");
        }
        assert!(
            !svg.contains(">1<"),
            "x axis should start at the decade of the smallest N"
        );
        assert!(svg.contains("waitpid-pid · 5.10 &lt;old&gt;"));
        assert_eq!(
            svg.matches("<polyline").count(),
            3,
            "two series lines and one fit"
        );
        assert!(svg.contains("stroke-dasharray=\"8 4\""));
        assert!(loglog_svg("t", "y", &[]).is_none());
    }
}
