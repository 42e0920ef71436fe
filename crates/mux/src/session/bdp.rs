//! Receive-window growth from bandwidth-delay-product estimates, after
//! grpc-go's `bdp_estimator`: on a link whose round trip is long, a fixed
//! window caps a transfer at `window / rtt` bytes per second, so the
//! receiver measures how many bytes arrive in one round trip and raises
//! its windows when the peer fills them.
//!
//! A probe is one `PING` with a marker payload. From the `PING` to its
//! `ACK` (one round trip) the received flow-controlled bytes are counted.
//! If that sample is at least 2/3 of the current estimate and the
//! bandwidth it implies (`sample / (1.5 × smoothed rtt)`) is the highest
//! seen, the estimate becomes twice the sample, capped. The session then
//! raises the connection's and each stream's window with its next grant
//! back (section 6.4: a `WINDOW_UPDATE` may grant more than was consumed,
//! so no wire change is needed). Growth is granted only as credit is
//! (data read, or dropped unread): a peer cannot grow a window it has not
//! cycled. Once grown, the cap, not the configured windows, bounds what a
//! connection may buffer for a reader that stops.
//!
//! Two choices differ from grpc-go, both to keep quiet connections quiet:
//! - a probe starts only on data that shows a transfer under way: a frame
//!   of at least [`BULK_FRAME`] bytes, or any frame that leaves the peer
//!   less than half a window of credit. Small calls never cause a `PING`,
//!   and the clock is read only when a probe starts or ends. (The frame
//!   that starts a probe should be the first of a window's worth: a probe
//!   started mid-window would miss the rest of it in its sample.)
//! - probes are at least [`PROBE_INTERVAL`] apart, so they stay inside the
//!   default ping budget of a weft peer (64 per 10 s, section 6.7), which
//!   counts every `PING` it receives.
//!
//! And one to keep a window from growing into a queue: a probe's round
//! trip includes whatever waits ahead of the `PING` and its `ACK` (on
//! loopback, or any link whose buffers hold more than a window, the
//! peer's bytes already in the socket buffers), and the bytes received
//! meanwhile are that queue, not the link's bandwidth-delay product. A
//! window grown from them lets the peer queue more, the next round trip
//! is longer still, and a small call on the connection waits behind all
//! of it (bufferbloat). So a sample counts the bytes of one round trip of
//! the link's own: scaled by the shortest round trip seen over this one's
//! (as BBR's estimate is bandwidth times the least round trip). On a
//! link without a queue every round trip is the shortest and nothing
//! changes. The shortest round trip is forgotten after [`MIN_RTT_LIFE`]
//! (as BBR's), so a route that got longer is learnt again.
//!
//! And one for links whose round trip is too short to need more than the
//! configured window ([`MIN_GROWTH_RTT`]): on loopback a whole window
//! reaches the reader within one round trip whatever its size (the bytes
//! cross at memory speed, and the round trip is the peer's own work), so
//! every probe found the window full and grew it, to 196-672 KiB per stream
//! from the 64 KiB default, while the transfer went no faster (what limits
//! it there is the two ends' work, not credit): a small call beside it
//! waited behind that window in the kernel on each leg (its p50 about
//! doubled, 125 against 210-265 us in a scratch run over TCP loopback,
//! load 5.5, with more large echoes done at the fixed window).
//!
//! Sans-I/O like the rest of the session: every input carries its `now`.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::window::RecvWindow;

/// The payload of a probe `PING` (keepalive pings carry a small sequence
/// number, so the two never collide).
pub(crate) const PROBE_PAYLOAD: [u8; 8] = *b"weft-bdp";

/// A received frame at least this large starts a probe: 16 KiB, a
/// quarter of the default frame payload, larger than small calls send.
pub(crate) const BULK_FRAME: u32 = 16 * 1024;

/// Whether data of `len` bytes that left the peer `stream` and `conn`
/// credit shows a transfer under way (what a probe waits for).
#[inline]
pub(crate) fn transfer_under_way(len: u32, stream: RecvWindow, conn: RecvWindow) -> bool {
    len >= BULK_FRAME || stream.under_pressure() || conn.under_pressure()
}

/// The least time between the starts of two probes: at most 40 probes per
/// 10 s, inside a weft peer's default budget of 64 pings (section 6.7)
/// with room for keepalive.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// The shortest round trip a window is grown for: 1 ms. Below it 64 KiB
/// per round trip is at least 64 MB/s per stream (on loopback, where round
/// trips are 0.1-0.3 ms, over 200 MB/s, and growth there made nothing
/// faster), while a grown window is what a small call waits behind (see
/// the module's doc). The price is a fast LAN's: at 0.2 ms one stream is
/// held to about 330 MB/s, so a link that needs more per stream at such
/// round trips is configured for it (`Config::stream_window`); no round
/// trip tells loopback from such a LAN.
pub(crate) const MIN_GROWTH_RTT: Duration = Duration::from_millis(1);

/// How long the shortest round trip seen stands before a probe's own
/// replaces it: 10 s, as BBR's `min_rtt` filter.
pub(crate) const MIN_RTT_LIFE: Duration = Duration::from_secs(10);

/// A sample at least this fraction of the estimate may raise it.
const BETA: f64 = 2.0 / 3.0;
/// The new estimate is this multiple of the sample.
const GAMMA: u64 = 2;
/// Weight of a new round-trip sample once the first ten are averaged.
const ALPHA: f64 = 0.9;

/// The estimator of one connection, allocated when its first probe is
/// due: idle connections and ones that carry only small calls never pay
/// for it (the connection's shared state has a size class to fit).
#[derive(Debug, Default)]
pub(crate) struct Growth(Option<Box<Estimator>>);

impl Growth {
    /// The window to grant: the estimate, or `configured` before any.
    #[inline]
    pub(crate) fn window(&self, configured: u32) -> u32 {
        self.0.as_ref().map_or(configured, |e| e.window())
    }

    /// [`Estimator::on_data`], starting the estimator from the
    /// `configured` stream window the first time a transfer is under way, if
    /// growth is on (`cap`). Only the common case is inline, always: no
    /// estimator yet and no transfer under way (every small call) is one
    /// test, which as a call cost about 20 instructions.
    #[inline(always)]
    pub(crate) fn on_data(
        &mut self,
        n: u32,
        pressure: bool,
        cap: Option<NonZeroU32>,
        configured: u32,
        now: &mut dyn FnMut() -> Instant,
    ) -> bool {
        if self.0.is_none() && !pressure {
            return false;
        }
        self.on_data_started(n, pressure, cap, configured, now)
    }

    #[inline(never)]
    fn on_data_started(
        &mut self,
        n: u32,
        pressure: bool,
        cap: Option<NonZeroU32>,
        configured: u32,
        now: &mut dyn FnMut() -> Instant,
    ) -> bool {
        match &mut self.0 {
            Some(e) => e.on_data(n, pressure, now),
            None if pressure && cap.is_some() => self
                .0
                .insert(Box::new(Estimator::new(
                    configured,
                    cap.map(NonZeroU32::get),
                )))
                .on_data(n, pressure, now),
            None => false,
        }
    }

    /// [`Estimator::on_ack`]; nothing before the first probe.
    pub(crate) fn on_ack(&mut self, now: Instant) -> Option<u32> {
        self.0.as_mut()?.on_ack(now)
    }
}

/// Where the probe stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Probe {
    /// Growth is off, or the estimate reached the cap: no more probes.
    Off,
    /// The next data of a transfer under way starts a probe (at or after
    /// `not_before`).
    Idle { not_before: Option<Instant> },
    /// A probe `PING` went out at `sent`; `bytes` received since.
    Out { sent: Instant, bytes: u64 },
}

/// The estimator of one connection.
#[derive(Clone, Debug)]
pub(crate) struct Estimator {
    probe: Probe,
    /// The current estimate: the window the receiver grants, in bytes.
    bdp: u32,
    cap: u32,
    /// Smoothed round trip, in seconds (0 before the first sample).
    rtt: f64,
    samples: u32,
    /// Highest bandwidth seen, bytes per second.
    max_bw: f64,
    /// The shortest round trip seen, in seconds (`INFINITY` before the
    /// first non-zero sample): the link's own, no queue ahead of the probe.
    min_rtt: f64,
    /// When `min_rtt` was measured (it stands for [`MIN_RTT_LIFE`]).
    min_rtt_at: Option<Instant>,
}

impl Estimator {
    /// An estimator starting from `window` and growing to at most `cap`;
    /// `cap: None` turns growth off.
    pub(crate) fn new(window: u32, cap: Option<u32>) -> Estimator {
        let cap = cap.map_or(window, |c| c.max(window));
        Estimator {
            probe: if cap > window {
                Probe::Idle { not_before: None }
            } else {
                Probe::Off
            },
            bdp: window,
            cap,
            rtt: 0.0,
            samples: 0,
            max_bw: 0.0,
            min_rtt: f64::INFINITY,
            min_rtt_at: None,
        }
    }

    /// The current estimate (the window to grant), in bytes.
    pub(crate) fn window(&self) -> u32 {
        self.bdp
    }

    /// Whether a probe is out.
    #[cfg(test)]
    fn probing(&self) -> bool {
        matches!(self.probe, Probe::Out { .. })
    }

    /// `n` flow-controlled bytes arrived; `pressure`: they show a transfer
    /// under way ([`transfer_under_way`]). Returns true
    /// when a probe starts: the caller sends a `PING` with
    /// [`PROBE_PAYLOAD`] now. The clock is read only then.
    #[inline]
    pub(crate) fn on_data(
        &mut self,
        n: u32,
        pressure: bool,
        now: &mut dyn FnMut() -> Instant,
    ) -> bool {
        match &mut self.probe {
            Probe::Out { bytes, .. } => {
                *bytes += u64::from(n);
                false
            }
            Probe::Idle { not_before } if pressure => {
                let t = now();
                if not_before.is_some_and(|nb| t < nb) {
                    return false;
                }
                // The frame that starts the probe counts, as in grpc-go:
                // it is part of what the peer sends in this round trip.
                self.probe = Probe::Out {
                    sent: t,
                    bytes: u64::from(n),
                };
                true
            }
            Probe::Idle { .. } | Probe::Off => false,
        }
    }

    /// The probe's `ACK` arrived at `now`. Returns the new estimate when
    /// it grew (the caller raises its windows to it).
    pub(crate) fn on_ack(&mut self, now: Instant) -> Option<u32> {
        let Probe::Out { sent, bytes } = self.probe else {
            return None; // not ours, or late: nothing to measure
        };
        let rtt = now.saturating_duration_since(sent).as_secs_f64();
        self.samples += 1;
        if self.samples <= 10 {
            self.rtt += (rtt - self.rtt) / f64::from(self.samples);
        } else {
            self.rtt += (rtt - self.rtt) * ALPHA;
        }
        self.probe = Probe::Idle {
            not_before: Some(sent + PROBE_INTERVAL),
        };
        // A zero round trip (a virtual clock that did not move) gives no
        // bandwidth; the sample alone still decides below.
        let bw = if self.rtt > 0.0 {
            bytes as f64 / (self.rtt * 1.5)
        } else {
            f64::INFINITY
        };
        if bw > self.max_bw {
            self.max_bw = bw;
        }
        // The bytes of one round trip of the link's own, not of a queue
        // (see the module's doc). A zero round trip scales nothing.
        let bytes = if rtt > 0.0 {
            let expired = self.min_rtt_at.is_some_and(|at| now >= at + MIN_RTT_LIFE);
            if rtt <= self.min_rtt || expired {
                self.min_rtt = rtt;
                self.min_rtt_at = Some(now);
            }
            (bytes as f64 * self.min_rtt / rtt) as u64
        } else {
            bytes
        };
        if self.min_rtt < MIN_GROWTH_RTT.as_secs_f64() {
            return None;
        }
        if (bytes as f64) < BETA * f64::from(self.bdp) || bw < self.max_bw {
            return None;
        }
        let grown = (bytes.saturating_mul(GAMMA)).min(u64::from(self.cap)) as u32;
        if grown <= self.bdp {
            return None;
        }
        self.bdp = grown;
        if self.bdp >= self.cap {
            self.probe = Probe::Off;
        }
        Some(self.bdp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u32 = 1024;

    /// Runs one probe: `bytes` arrive under pressure over `rtt`.
    fn probe(e: &mut Estimator, at: Instant, bytes: u32, rtt: Duration) -> Option<u32> {
        assert!(e.on_data(bytes, true, &mut || at), "a probe starts");
        e.on_ack(at + rtt)
    }

    #[test]
    fn a_window_bound_link_doubles_the_window_up_to_the_cap() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(40);
        let mut e = Estimator::new(256 * K, Some(2048 * K));
        // Each round trip the peer fills the whole window: the estimate
        // doubles until the cap, then probing stops.
        let mut t = t0;
        let mut seen = Vec::new();
        for _ in 0..3 {
            let w = e.window();
            seen.push(probe(&mut e, t, w, rtt));
            t += PROBE_INTERVAL;
        }
        assert_eq!(seen, [Some(512 * K), Some(1024 * K), Some(2048 * K)]);
        assert!(!e.on_data(K, true, &mut || t), "at the cap: no more probes");
    }

    #[test]
    fn bytes_between_ping_and_ack_make_the_sample() {
        let t0 = Instant::now();
        let mut e = Estimator::new(100 * K, Some(1 << 30));
        assert!(e.on_data(10 * K, true, &mut || t0));
        // Data while the probe is out counts, pressure or not, and starts
        // nothing new.
        assert!(!e.on_data(30 * K, false, &mut || unreachable!("no clock read")));
        assert!(!e.on_data(30 * K, true, &mut || unreachable!("no clock read")));
        assert!(e.probing());
        // 70 KiB is at least 2/3 of 100 KiB: twice the sample.
        assert_eq!(e.on_ack(t0 + Duration::from_millis(10)), Some(140 * K));
        assert!(!e.probing());
    }

    #[test]
    fn a_sample_below_two_thirds_of_the_window_does_not_grow_it() {
        let t0 = Instant::now();
        let mut e = Estimator::new(300 * K, Some(1 << 30));
        assert_eq!(probe(&mut e, t0, 199 * K, Duration::from_millis(5)), None);
        assert_eq!(e.window(), 300 * K);
        let t1 = t0 + PROBE_INTERVAL;
        assert_eq!(
            probe(&mut e, t1, 200 * K, Duration::from_millis(5)),
            Some(400 * K)
        );
    }

    #[test]
    fn a_sample_with_less_bandwidth_than_the_best_does_not_grow_it() {
        let t0 = Instant::now();
        let mut e = Estimator::new(64 * K, Some(1 << 30));
        // 64 KiB in 10 ms sets the best bandwidth and grows to 128 KiB.
        let fast = Duration::from_millis(10);
        assert_eq!(probe(&mut e, t0, 64 * K, fast), Some(128 * K));
        // 100 KiB (over 2/3 of 128) but over a much longer round trip:
        // less bandwidth than the best, so no growth (a queue building up,
        // not a wider pipe).
        let slow = Duration::from_millis(400);
        assert_eq!(probe(&mut e, t0 + PROBE_INTERVAL, 100 * K, slow), None);
        assert_eq!(e.window(), 128 * K);
    }

    #[test]
    fn a_round_trip_lengthened_by_a_queue_does_not_grow_the_window() {
        let t0 = Instant::now();
        let mut e = Estimator::new(64 * K, Some(1 << 30));
        // The link's own round trip: 10 ms, and the window filled in it.
        let rtt = Duration::from_millis(10);
        assert_eq!(probe(&mut e, t0, 64 * K, rtt), Some(128 * K));
        // The grown window's bytes now wait in a queue: twice the bytes,
        // but over twice the round trip (the probe's ACK waited behind
        // them). The link carries no more per round trip of its own, so
        // the window stays (it grew to 256 KiB here before, and on with
        // every probe while the queue grew).
        let t1 = t0 + PROBE_INTERVAL;
        assert_eq!(probe(&mut e, t1, 128 * K, rtt * 2), None);
        assert_eq!(e.window(), 128 * K);
        // A longer round trip that is the link's (no queue: the bytes per
        // round trip of its own grew too) still grows it.
        let t2 = t1 + PROBE_INTERVAL;
        assert_eq!(probe(&mut e, t2, 128 * K, rtt), Some(256 * K));
    }

    #[test]
    fn a_window_full_every_loopback_round_trip_is_not_grown() {
        // Loopback: the whole window arrives within each 0.1-0.3 ms round
        // trip, however large (it grew to 256 KiB this way before).
        let t0 = Instant::now();
        let mut e = Estimator::new(64 * K, Some(16 * 1024 * K));
        for (i, us) in [205, 338, 112, 138, 166, 900].into_iter().enumerate() {
            let at = t0 + PROBE_INTERVAL * i as u32;
            let rtt = Duration::from_micros(us);
            let full = e.window();
            assert_eq!(probe(&mut e, at, full, rtt), None, "at {us} us");
        }
        assert_eq!(e.window(), 64 * K);
        // A round trip of a millisecond is a link's, and grows it.
        let mut e = Estimator::new(64 * K, Some(16 * 1024 * K));
        assert_eq!(probe(&mut e, t0, 64 * K, MIN_GROWTH_RTT), Some(128 * K));
    }

    #[test]
    fn the_shortest_round_trip_is_forgotten_after_ten_seconds() {
        let t0 = Instant::now();
        let mut e = Estimator::new(64 * K, Some(1 << 30));
        // 10 ms round trips, the window not filled.
        let fast = Duration::from_millis(10);
        assert_eq!(probe(&mut e, t0, 16 * K, fast), None);
        // The route got four times longer: while the 10 ms stands, the
        // bytes of a 40 ms round trip count as a quarter of them ...
        let slow = Duration::from_millis(40);
        assert_eq!(probe(&mut e, t0 + PROBE_INTERVAL, 32 * K, slow), None);
        // ... and once it expired, 40 ms is the link's own round trip: a
        // full window in it grows the window (it stayed before).
        let t2 = t0 + MIN_RTT_LIFE + fast;
        assert_eq!(probe(&mut e, t2, 64 * K, slow), Some(128 * K));
    }

    #[test]
    fn a_bulk_frame_or_a_window_half_used_shows_a_transfer() {
        let (stream, conn) = (RecvWindow::new(256 * K), RecvWindow::new(1024 * K));
        assert!(
            !transfer_under_way(BULK_FRAME - 1, stream, conn),
            "a small call"
        );
        assert!(transfer_under_way(BULK_FRAME, stream, conn));
        let mut used = stream;
        used.debit(129 * K).unwrap();
        assert!(
            transfer_under_way(K, used, conn),
            "small frames filling a window"
        );
    }

    #[test]
    fn probes_need_pressure_and_are_paced() {
        let t0 = Instant::now();
        let mut e = Estimator::new(64 * K, Some(1 << 30));
        assert!(
            !e.on_data(K, false, &mut || unreachable!("no clock read")),
            "no pressure, no probe"
        );
        assert!(e.on_data(K, true, &mut || t0));
        e.on_ack(t0 + Duration::from_millis(1));
        let early = t0 + PROBE_INTERVAL - Duration::from_millis(1);
        assert!(
            !e.on_data(K, true, &mut || early),
            "too soon after the last"
        );
        assert!(e.on_data(K, true, &mut || t0 + PROBE_INTERVAL));
    }

    #[test]
    fn growth_off_never_probes_and_a_stray_ack_measures_nothing() {
        let t0 = Instant::now();
        let mut off = Estimator::new(64 * K, None);
        assert!(!off.on_data(64 * K, true, &mut || unreachable!("no clock read")));
        assert_eq!(off.on_ack(t0), None);
        let mut on = Estimator::new(64 * K, Some(1 << 20));
        assert_eq!(on.on_ack(t0), None, "an ACK with no probe out");
        assert_eq!(on.window(), 64 * K);
    }
}
