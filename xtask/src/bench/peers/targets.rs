//! The ratios a run is read against: the call-path issue's targets on the
//! one-worker runtime (weft against tarpc at 64 in flight, sequential
//! against the raw tokio codec), the default runtime's figures listed
//! beside them, and the bound on what encryption may cost against plain.
//! Each is printed with its goal and whether this run met it; read, never
//! gated (wall time on shared cores).

use crate::stats::three_digits;

use super::{DEFAULT_RUNTIME, PeersRun};

const ONE_WORKER: &str = "current-thread";

/// What a ratio must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Goal {
    AtLeast(f64),
    AtMost(f64),
    /// Shown for reading, no target.
    Listed,
}

/// What is divided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Compare {
    /// Calls per second of `of` over those of `vs` (higher is better).
    Throughput,
    /// Time per call of `of` over that of `vs` (lower is better).
    Time,
}

/// One peer on one runtime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Side {
    pub(crate) peer: &'static str,
    pub(crate) runtime: &'static str,
}

/// One ratio between two cells of the same shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Target {
    pub(crate) shape: &'static str,
    pub(crate) of: Side,
    pub(crate) vs: Side,
    pub(crate) compare: Compare,
    pub(crate) goal: Goal,
    /// The issue the goal comes from (empty for a listed ratio).
    pub(crate) source: &'static str,
}

const fn on(peer: &'static str, runtime: &'static str) -> Side {
    Side { peer, runtime }
}

/// `of` against `vs` in one shape, both on `runtime`.
const fn against(
    shape: &'static str,
    runtime: &'static str,
    (of, vs): (&'static str, &'static str),
    compare: Compare,
    goal: Goal,
    source: &'static str,
) -> Target {
    Target {
        shape,
        of: on(of, runtime),
        vs: on(vs, runtime),
        compare,
        goal,
        source,
    }
}

use Compare::{Throughput, Time};
use Goal::{AtLeast, AtMost, Listed};

/// Every ratio, in the order printed: the call-path issue's targets on
/// the one-worker runtime (where nothing crosses a core), the default
/// runtime's figures beside them, and encryption's bound against plain.
pub(crate) const TARGETS: &[Target] = &[
    against(
        "joined-64",
        ONE_WORKER,
        ("weft", "tarpc"),
        Throughput,
        AtLeast(3.0),
        "#28",
    ),
    against(
        "spawned-64",
        ONE_WORKER,
        ("weft", "tarpc"),
        Throughput,
        AtLeast(3.0),
        "#28",
    ),
    against(
        "sequential",
        ONE_WORKER,
        ("weft", "tokio-codec"),
        Time,
        AtMost(1.2),
        "#28",
    ),
    against(
        "joined-64",
        DEFAULT_RUNTIME,
        ("weft", "tarpc"),
        Throughput,
        Listed,
        "",
    ),
    against(
        "spawned-64",
        DEFAULT_RUNTIME,
        ("weft", "tarpc"),
        Throughput,
        Listed,
        "",
    ),
    against(
        "sequential",
        ONE_WORKER,
        ("weft-encrypted", "weft"),
        Time,
        AtMost(1.1),
        "#5",
    ),
    against(
        "joined-64",
        ONE_WORKER,
        ("weft-encrypted", "weft"),
        Time,
        AtMost(1.1),
        "#5",
    ),
];

impl Target {
    /// What is compared, in words: `weft spawned-64 calls/s vs tarpc`.
    pub(crate) fn label(&self) -> String {
        let metric = match self.compare {
            Throughput => "calls/s",
            Time => "per call",
        };
        let (of, vs) = (self.of, self.vs);
        if of.runtime != vs.runtime {
            format!(
                "{} {} {metric}, {} vs {}",
                of.peer, self.shape, of.runtime, vs.runtime
            )
        } else if of.runtime == DEFAULT_RUNTIME {
            format!("{} {} {metric} vs {}", of.peer, self.shape, vs.peer)
        } else {
            format!(
                "{} {} {metric} vs {} ({})",
                of.peer, self.shape, vs.peer, of.runtime
            )
        }
    }

    /// The ratio in `run`, if both cells were measured.
    pub(crate) fn value(&self, run: &PeersRun) -> Option<f64> {
        let of = run.cell(self.of.peer, self.of.runtime, self.shape)?;
        let vs = run.cell(self.vs.peer, self.vs.runtime, self.shape)?;
        Some(match self.compare {
            Throughput => vs.per_call.median / of.per_call.median,
            Time => of.per_call.median / vs.per_call.median,
        })
    }

    /// One markdown list line: the ratio, the goal, and met or not.
    pub(crate) fn line(&self, run: &PeersRun) -> String {
        let Some(value) = self.value(run) else {
            return format!("- {}: not measured in this run", self.label());
        };
        let verdict = |met: bool, sign: &str, target: f64| {
            format!(
                "target {sign} {target}× ({}): {}",
                self.source,
                if met { "met" } else { "NOT met" }
            )
        };
        let goal = match self.goal {
            AtLeast(target) => verdict(value >= target, "≥", target),
            AtMost(target) => verdict(value <= target, "≤", target),
            Listed => "listed, no target".to_string(),
        };
        format!("- {}: **{}×** ({goal})", self.label(), three_digits(value))
    }
}

/// Every target's line under a heading.
pub(crate) fn render(run: &PeersRun) -> String {
    let lines: Vec<String> = TARGETS.iter().map(|t| t.line(run)).collect();
    format!(
        "weft's targets (this run; {DEFAULT_RUNTIME} runtime unless named):\n\n{}\n",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::tests::json;
    use super::*;

    const MT: &str = "multi-thread";
    const CT: &str = "current-thread";

    /// tarpc 5 µs per call spawned, 10 µs joined (one worker and the
    /// default runtime); the tokio codec 10 µs sequential on one worker.
    fn run(weft: &[(&str, &str, &str, &[u64])]) -> PeersRun {
        let mut cells: Vec<(&str, &str, &str, &[u64])> = vec![
            ("tokio-codec", CT, "sequential", &[10000]),
            ("tarpc", CT, "spawned-64", &[5000]),
            ("tarpc", CT, "joined-64", &[10000]),
            ("tarpc", MT, "spawned-64", &[5000]),
            ("tarpc", MT, "joined-64", &[10000]),
        ];
        cells.extend_from_slice(weft);
        parse(&json(true, &cells)).unwrap()
    }

    fn lines(run: &PeersRun) -> Vec<String> {
        TARGETS.iter().map(|t| t.line(run)).collect()
    }

    #[test]
    fn each_target_says_met_or_not_at_its_bound() {
        let met = run(&[
            ("weft", CT, "joined-64", &[2500]),   // 4.00×
            ("weft", CT, "spawned-64", &[1666]),  // 3.00×
            ("weft", CT, "sequential", &[12000]), // exactly 1.2×
        ]);
        assert_eq!(
            lines(&met)[..3],
            [
                "- weft joined-64 calls/s vs tarpc (current-thread): **4.00×** (target ≥ 3× (#28): met)",
                "- weft spawned-64 calls/s vs tarpc (current-thread): **3.00×** (target ≥ 3× (#28): met)",
                "- weft sequential per call vs tokio-codec (current-thread): **1.20×** (target ≤ 1.2× (#28): met)",
            ]
        );
        let not_met = run(&[
            ("weft", CT, "joined-64", &[4000]),   // 2.50×
            ("weft", CT, "spawned-64", &[2000]),  // 2.50×
            ("weft", CT, "sequential", &[12100]), // 1.21×
        ]);
        let lines = lines(&not_met);
        assert!(
            lines[0].ends_with("**2.50×** (target ≥ 3× (#28): NOT met)"),
            "{}",
            lines[0]
        );
        assert!(
            lines[2].ends_with("**1.21×** (target ≤ 1.2× (#28): NOT met)"),
            "{}",
            lines[2]
        );
        assert_eq!(
            lines[5],
            "- weft-encrypted sequential per call vs weft (current-thread): not measured in this run"
        );
    }

    #[test]
    fn listed_ratios_have_no_verdict() {
        let run = run(&[
            ("weft", MT, "joined-64", &[5000]), // 2.00× tarpc
            ("weft", CT, "sequential", &[10000]),
            ("weft-encrypted", CT, "sequential", &[10500]), // 1.05× plain
        ]);
        let lines = lines(&run);
        assert!(
            lines.contains(
                &"- weft joined-64 calls/s vs tarpc: **2.00×** (listed, no target)".to_string()
            ),
            "{lines:?}"
        );
        assert!(
            lines.contains(
                &"- weft spawned-64 calls/s vs tarpc: not measured in this run".to_string()
            ),
            "{lines:?}"
        );
        assert!(lines.contains(&"- weft-encrypted sequential per call vs weft (current-thread): **1.05×** (target ≤ 1.1× (#5): met)".to_string()), "{lines:?}");
        let rendered = render(&run);
        assert!(
            rendered.starts_with(
                "weft's targets (this run; multi-thread runtime unless named):\n\n- weft joined-64"
            ),
            "{rendered}"
        );
        assert_eq!(
            rendered.lines().filter(|l| l.starts_with("- ")).count(),
            TARGETS.len()
        );
    }

    #[test]
    fn a_one_worker_ratio_names_its_runtime() {
        let target = Target {
            of: Side {
                peer: "weft",
                runtime: CT,
            },
            vs: Side {
                peer: "tarpc",
                runtime: CT,
            },
            ..TARGETS[0]
        };
        assert_eq!(
            target.label(),
            "weft joined-64 calls/s vs tarpc (current-thread)"
        );
    }
}
