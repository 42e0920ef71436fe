//! What a gate's measured figure is against its committed baseline: the
//! one outcome the allocation gate (`bench --check`) and the instruction
//! gate (`instr --check`) both report.

/// How one measured figure compares with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Within the tolerance either way.
    Pass,
    /// Below the baseline by more than the tolerance: passes; bless to
    /// lock the gain in.
    Improved,
    /// Above the baseline by more than the tolerance: fails.
    Regressed,
    /// Measured but not in the baseline: fails until blessed.
    Unbaselined,
    /// In the baseline but no longer measured: fails until blessed.
    Vanished,
}

impl Outcome {
    /// Whether the gate fails on it.
    pub(crate) fn fails(self) -> bool {
        matches!(self, Self::Regressed | Self::Unbaselined | Self::Vanished)
    }
}
