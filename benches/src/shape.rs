//! The call shapes a peer is measured in, and how a cell's call count is
//! split among its callers.

/// How calls are made on the one connection of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One caller, one call at a time; each call is timed.
    Sequential,
    /// `k` calls issued together from one task and awaited together
    /// (`join_all`; pipelining for the peers without multiplexing); each
    /// batch is timed.
    Joined(usize),
    /// `k` spawned tasks, each with a clone of one client, making calls one
    /// after another; the whole is timed.
    Spawned(usize),
}

impl Shape {
    /// What `cargo xtask bench --peers` measures by default, in the order
    /// its tables show them.
    pub const DEFAULT: [Shape; 6] = [
        Shape::Sequential,
        Shape::Spawned(2),
        Shape::Spawned(4),
        Shape::Spawned(8),
        Shape::Spawned(64),
        Shape::Joined(64),
    ];

    /// The name used on the command line and in JSON: `sequential`,
    /// `joined-64`, `spawned-8`.
    pub fn name(self) -> String {
        match self {
            Shape::Sequential => "sequential".to_string(),
            Shape::Joined(k) => format!("joined-{k}"),
            Shape::Spawned(k) => format!("spawned-{k}"),
        }
    }

    /// The shape named `name` ([`Shape::name`]; `k` at least 1).
    pub fn parse(name: &str) -> Option<Self> {
        if name == "sequential" {
            return Some(Shape::Sequential);
        }
        let (kind, k) = name.split_once('-')?;
        let k = k.parse().ok().filter(|k| *k > 0)?;
        match kind {
            "joined" => Some(Shape::Joined(k)),
            "spawned" => Some(Shape::Spawned(k)),
            _ => None,
        }
    }

    /// Calls in flight at once at most.
    pub fn callers(self) -> usize {
        match self {
            Shape::Sequential => 1,
            Shape::Joined(k) | Shape::Spawned(k) => k,
        }
    }

    /// One line for the report.
    pub fn description(self) -> String {
        match self {
            Shape::Sequential => "one caller, one call at a time; the median call".to_string(),
            Shape::Joined(k) => format!(
                "{k} calls issued together from one task and awaited together (join_all; \
                 pipelined writes for std-net and tokio-codec); the median batch / {k}"
            ),
            Shape::Spawned(k) => format!(
                "{k} spawned tasks, each with a clone of one client, calling one after another; \
                 wall time / calls"
            ),
        }
    }

    /// The units of a cell of `calls` calls: calls (sequential), batches
    /// (joined) or calls per caller (spawned), at least one; so the calls
    /// made are `units(calls) * callers()`, exactly `calls` when it is a
    /// multiple of [`Shape::callers`].
    pub fn units(self, calls: usize) -> usize {
        (calls / self.callers()).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nonsense_is_rejected() {
        for shape in Shape::DEFAULT.into_iter().chain([Shape::Joined(3)]) {
            assert_eq!(Shape::parse(&shape.name()), Some(shape));
        }
        assert_eq!(Shape::Spawned(64).name(), "spawned-64");
        for bad in [
            "joined-0",
            "joined",
            "spawned-x",
            "burst-4",
            "sequential-1",
            "",
        ] {
            assert_eq!(Shape::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_cells_calls_are_split_among_its_callers() {
        assert_eq!(Shape::Sequential.units(6400), 6400);
        assert_eq!(Shape::Joined(64).units(6400), 100);
        assert_eq!(Shape::Spawned(8).units(6400), 800);
        assert_eq!(Shape::Spawned(64).units(10), 1);
    }
}
