//! The progress bar: elapsed time (or calls) and the *current* call rate,
//! over the last second, not the mean since the start.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How far back the current rate looks.
const WINDOW: Duration = Duration::from_secs(1);

/// A progress bar on a terminal, hidden otherwise.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    /// Counting calls (`true`) or milliseconds.
    by_calls: bool,
    /// (time, completed) samples within the last [`WINDOW`].
    recent: VecDeque<(Duration, u64)>,
}

impl Progress {
    /// A bar for `len` calls (`by_calls`) or `len` milliseconds, with a
    /// label; hidden when stdout is not a terminal.
    pub(crate) fn new(len: u64, by_calls: bool, label: &str) -> Progress {
        if !std::io::stdout().is_terminal() {
            return Progress::hidden();
        }
        let bar = ProgressBar::new(len);
        let unit = if by_calls { "calls" } else { "ms" };
        let template = format!("{{spinner}} {label} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress {
            bar,
            by_calls,
            recent: VecDeque::new(),
        }
    }

    /// A bar that draws nothing.
    pub(crate) fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
            by_calls: false,
            recent: VecDeque::new(),
        }
    }

    /// The calls per second over the last [`WINDOW`], given a new sample.
    pub(crate) fn current_rate(&mut self, at: Duration, completed: u64) -> f64 {
        self.recent.push_back((at, completed));
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| at.saturating_sub(t) > WINDOW)
        {
            self.recent.pop_front();
        }
        match self.recent.front() {
            Some(&(t, n)) if at > t => (completed - n) as f64 / (at - t).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Redraws with the phase `at` this far, `completed` calls of which
    /// `failed` failed.
    pub(crate) fn update(&mut self, at: Duration, completed: u64, failed: u64) {
        let rate = self.current_rate(at, completed);
        if self.bar.is_hidden() {
            return;
        }
        self.bar.set_position(if self.by_calls {
            completed
        } else {
            u64::try_from(at.as_millis()).unwrap_or(u64::MAX)
        });
        self.bar.set_message(format!(
            "{completed} calls, {rate:.0}/s now, {failed} failed"
        ));
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_current_one_not_the_mean() {
        let mut p = Progress::hidden();
        let ms = Duration::from_millis;
        // 10 s at 1000/s, then it drops to 100/s.
        for t in 0..=100u64 {
            p.current_rate(ms(t * 100), t * 100);
        }
        let mut done = 10_000;
        let mut rate = 0.0;
        for t in 101..=120u64 {
            done += 10;
            rate = p.current_rate(ms(t * 100), done);
        }
        assert!((rate - 100.0).abs() < 1.0, "{rate}");
    }
}
