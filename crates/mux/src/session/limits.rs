//! What the configuration fixes for one session, copied once from
//! [`Config`] (with the frame limits widened to `usize`).

use std::num::NonZeroU32;
use std::time::Duration;

use crate::config::Config;

/// The session's configured limits and timeouts.
#[derive(Debug)]
pub(crate) struct Limits {
    /// Largest payload we send: ours, or the peer's if lower.
    pub(crate) max_payload: usize,
    pub(crate) max_metadata: usize,
    /// Our per-stream receive window.
    pub(crate) stream_window: u32,
    /// Our connection receive window.
    pub(crate) connection_window: u32,
    /// The cap on windows grown from bandwidth estimates (`None`: off).
    pub(crate) adaptive_window: Option<NonZeroU32>,
    pub(crate) max_concurrent: usize,
    pub(crate) max_send_buffer: usize,
    pub(crate) max_control_queue: usize,
    pub(crate) max_stream_id: u32,
    pub(crate) keepalive_interval: Option<Duration>,
    pub(crate) keepalive_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) progress_timeout: Option<Duration>,
    /// How long a half-closed peer's owed answers may take.
    pub(crate) half_close_drain: Duration,
}

impl Limits {
    pub(crate) fn new(config: &Config) -> Limits {
        Limits {
            max_payload: config.limits.max_payload as usize,
            max_metadata: config.limits.max_metadata as usize,
            stream_window: config.stream_window,
            connection_window: config.connection_window,
            adaptive_window: config.adaptive_window.and_then(NonZeroU32::new),
            max_concurrent: config.max_concurrent_streams,
            max_send_buffer: config.max_send_buffer,
            max_control_queue: config.max_control_queue,
            max_stream_id: config.max_stream_id,
            keepalive_interval: config.keepalive_interval,
            keepalive_timeout: config.keepalive_timeout,
            idle_timeout: config.idle_timeout,
            progress_timeout: config.progress_timeout,
            half_close_drain: config.half_close_drain,
        }
    }
}
