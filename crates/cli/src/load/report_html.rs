//! `--report FILE.html`: one self-contained page (inline SVG, no scripts,
//! nothing fetched) with the run's plots: throughput and p99 over time and
//! the latency histogram, or for a sweep throughput and p99 per step.

use std::fmt::Write as _;

use super::{Body, Output};

const W: f64 = 720.0;
const H: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

/// Escapes text for HTML and SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One plotted line: its name, colour and points (`None` leaves a gap).
struct Line<'a> {
    name: &'a str,
    colour: &'a str,
    points: Vec<Option<f64>>,
}

fn max_of(points: &[Option<f64>]) -> f64 {
    points.iter().flatten().copied().fold(0.0, f64::max)
}

/// A chart with `left` on the left axis and `right` on the right one, over
/// x labels `xs`.
fn chart(title: &str, xs: &[String], left: &Line<'_>, right: &Line<'_>) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n\
         <title>{}</title>\n<text x=\"{LEFT}\" y=\"18\" font-weight=\"bold\">{}</text>\n",
        esc(title),
        esc(title)
    );
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let n = xs.len().max(1);
    let x_at = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n as f64;
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#999\"/>"
    );
    for (axis, line) in [(LEFT - 6.0, left), (W - RIGHT + 6.0, right)] {
        let top = max_of(&line.points).max(f64::MIN_POSITIVE) * 1.1;
        let anchor = if axis < W / 2.0 { "end" } else { "start" };
        let _ = writeln!(
            s,
            "<text x=\"{axis}\" y=\"{TOP}\" text-anchor=\"{anchor}\" fill=\"{}\">{:.0}</text>\
             <text x=\"{axis}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"{}\">{}</text>",
            line.colour,
            top,
            TOP + plot_h,
            line.colour,
            esc(line.name)
        );
        let mut path = String::new();
        let mut pen_down = false;
        for (i, p) in line.points.iter().enumerate() {
            match p {
                Some(v) => {
                    let y = TOP + plot_h * (1.0 - v / top);
                    let _ = write!(
                        path,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        x_at(i),
                        y
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let _ = writeln!(
            s,
            "<path class=\"series\" data-name=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>",
            esc(line.name),
            path.trim_end(),
            line.colour
        );
    }
    let every = xs.len().div_ceil(12).max(1);
    for (i, x) in xs.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x_at(i),
            H - BOTTOM + 16.0,
            esc(x)
        );
    }
    s + "</svg>\n"
}

/// A bar chart of the histogram buckets.
fn histogram(buckets: &[super::histogram::Bucket]) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n\
         <title>latency histogram</title>\n\
         <text x=\"{LEFT}\" y=\"18\" font-weight=\"bold\">latency histogram (successful calls)</text>\n"
    );
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64;
    let n = buckets.len().max(1) as f64;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / n;
    for (i, b) in buckets.iter().enumerate() {
        let h = plot_h * b.count as f64 / top;
        let x = LEFT + bw * i as f64;
        let _ = writeln!(
            s,
            "<rect class=\"bucket\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#4a7\">\
             <title>≤ {:.1} µs: {}</title></rect>",
            TOP + plot_h - h,
            (bw - 2.0).max(1.0),
            b.upto_us,
            b.count
        );
        if i % (buckets.len().div_ceil(10).max(1)) == 0 {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{:.0}µs</text>",
                x + bw / 2.0,
                H - BOTTOM + 16.0,
                b.upto_us
            );
        }
    }
    s + "</svg>\n"
}

/// A table of the outages (nothing when there were none).
fn outages(outages: &[super::outage::Outage]) -> String {
    if outages.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<table class=\"outages\">\n<caption>outages (the server could not be reached)</caption>\n\
         <tr><th>start s</th><th>length s</th><th>calls failed</th></tr>\n",
    );
    for o in outages {
        let length = o
            .length_s
            .map_or_else(|| "to the end".to_owned(), |l| format!("{l:.3}"));
        let _ = writeln!(
            s,
            "<tr><td>{:.3}</td><td>{length}</td><td>{}</td></tr>",
            o.start_s, o.calls_failed
        );
    }
    s + "</table>\n"
}

/// The page.
pub(crate) fn render(out: &Output) -> String {
    let mut body = String::new();
    match &out.body {
        Body::Run(r) => {
            let xs: Vec<String> = r.series.iter().map(|p| format!("{}s", p.second)).collect();
            body += &chart(
                "throughput and p99 over time",
                &xs,
                &Line {
                    name: "calls/s",
                    colour: "#357",
                    points: r.series.iter().map(|p| Some(p.throughput)).collect(),
                },
                &Line {
                    name: "p99 µs",
                    colour: "#c33",
                    points: r.series.iter().map(|p| p.p99_us).collect(),
                },
            );
            body += &histogram(&r.histogram);
            body += &outages(&r.outages);
        }
        Body::Sweep { rows, .. } => {
            let xs: Vec<String> = rows
                .iter()
                .map(|r| match r.rate {
                    Some(rate) => format!("{rate:.0}/s"),
                    None => format!("c={}", r.concurrency),
                })
                .collect();
            body += &chart(
                "sweep: throughput and p99 per step",
                &xs,
                &Line {
                    name: "calls/s",
                    colour: "#357",
                    points: rows.iter().map(|r| Some(r.throughput)).collect(),
                },
                &Line {
                    name: "p99 µs",
                    colour: "#c33",
                    points: rows.iter().map(|r| r.p99_us).collect(),
                },
            );
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>weft load report</title></head>\n<body>\n<h1>weft load</h1>\n<pre>{}</pre>\n{body}</body></html>\n",
        esc(&out.render())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_gaps() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        let xs = vec!["1s".to_string(), "2s".into(), "3s".into()];
        let l = Line {
            name: "a",
            colour: "#000",
            points: vec![Some(1.0), None, Some(2.0)],
        };
        let svg = chart("t", &xs, &l, &l);
        // A gap starts a new sub-path: two moves, no line across it.
        let d = svg.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert!(!d.contains('L'), "{d}");
    }

    #[test]
    fn outages_are_a_table_row_each() {
        use super::super::outage::Outage;
        assert_eq!(outages(&[]), "");
        let t = outages(&[
            Outage {
                start_s: 2.5,
                length_s: Some(0.4),
                calls_failed: 64,
            },
            Outage {
                start_s: 6.0,
                length_s: None,
                calls_failed: 2,
            },
        ]);
        assert_eq!(t.matches("<tr><td>").count(), 2, "{t}");
        assert!(t.contains("<td>2.500</td><td>0.400</td><td>64</td>"), "{t}");
        assert!(t.contains("<td>to the end</td>"), "{t}");
    }
}
