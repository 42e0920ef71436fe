//! A hand-written horizontal bar chart (SVG text, no dependencies) for
//! docs/BENCHMARKS.md.

use std::fmt::Write as _;

/// One bar: its label, the value that sets its length, and the text printed
/// beside it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub(crate) label: String,
    pub(crate) value: f64,
    pub(crate) text: String,
}

const WIDTH: f64 = 760.0;
const LABEL_WIDTH: f64 = 230.0;
const BAR_AREA: f64 = 420.0;
const ROW: f64 = 24.0;
const TOP: f64 = 40.0;

/// A chart of `bars` (zero or negative values get no bar). With `log`, bar
/// lengths follow the logarithm, so nanoseconds and milliseconds share a chart.
pub(crate) fn bars(title: &str, note: &str, bars: &[Bar], log: bool) -> String {
    let positive: Vec<f64> = bars.iter().map(|b| b.value).filter(|v| *v > 0.0).collect();
    let max = positive.iter().copied().fold(0.0, f64::max);
    let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let length = |v: f64| -> f64 {
        if v <= 0.0 || max <= 0.0 {
            0.0
        } else if log {
            let lo = (min / 4.0).ln();
            BAR_AREA * (v.ln() - lo) / (max.ln() - lo)
        } else {
            BAR_AREA * v / max
        }
    };
    let height = TOP + ROW * bars.len() as f64 + 30.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let w = length(bar.value).max(if bar.value > 0.0 { 2.0 } else { 0.0 });
        let _ = writeln!(
            out,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{}</text>\n\
             <rect x=\"{LABEL_WIDTH}\" y=\"{:.0}\" width=\"{w:.1}\" height=\"{:.0}\" fill=\"#4a7bb7\"/>\n\
             <text x=\"{:.1}\" y=\"{:.0}\">{}</text>",
            LABEL_WIDTH - 8.0,
            y + 15.0,
            escape(&bar.label),
            y + 3.0,
            ROW - 6.0,
            LABEL_WIDTH + w + 6.0,
            y + 15.0,
            escape(&bar.text),
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{:.0}\" font-size=\"11\" fill=\"#555\">{}</text>\n</svg>",
        height - 10.0,
        escape(note)
    );
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
            text: format!("{value}"),
        }
    }

    fn widths(svg: &str) -> Vec<f64> {
        svg.lines()
            .filter(|l| l.starts_with("<rect x="))
            .map(|l| {
                let w = l.split("width=\"").nth(1).unwrap();
                w[..w.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn linear_bars_are_proportional_and_labels_escaped() {
        let svg = bars(
            "t",
            "n",
            &[bar("a<b", 50.0), bar("c", 100.0), bar("none", 0.0)],
            false,
        );
        assert_eq!(widths(&svg), vec![210.0, 420.0, 0.0]);
        assert!(svg.contains("a&lt;b") && !svg.contains("a<b"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn log_bars_keep_small_values_visible_and_ordered() {
        let w = widths(&bars(
            "t",
            "n",
            &[bar("ns", 25.0), bar("µs", 25_000.0), bar("ms", 2.5e6)],
            true,
        ));
        assert!(w[0] > 2.0 && w[0] < w[1] && w[1] < w[2]);
        assert_eq!(w[2], 420.0);
    }
}
