//! `weft serve`'s admission and lifetime flags, and its log output.

use std::time::Duration;

use clap::Args;
use weft::Config;

use crate::args::parse_duration;

/// Limits and timeouts of `weft serve` (defaults: the library's).
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeLimits {
    /// Close a connection with no call and no PING from the client for
    /// this long (`off`: never). A client with keepalive on stays up.
    #[arg(long, value_parser = parse_optional_duration, default_value = "30s")]
    pub(crate) idle_timeout: MaybeDuration,
    /// Reset a call that waits on the client with nothing moving for this
    /// long (a half-sent request, replies held back by its flow control);
    /// `off` (default): never.
    #[arg(long, value_parser = parse_optional_duration, default_value = "off")]
    pub(crate) progress_timeout: MaybeDuration,
    /// Deadline for a client's handshake.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub(crate) handshake_timeout: Duration,
    /// Handshakes in progress at once; when full, a stalled one is evicted
    /// for a newcomer, else the newcomer is refused (retry-safe).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_pending_handshakes: u32,
    /// Connections held at once (default: no cap); more are refused
    /// (retry-safe).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,
    /// Connections held at once per client IP address (default: no limit).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections_per_address: Option<u32>,
    /// Listen backlog (TCP; the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = weft::DEFAULT_BACKLOG, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) backlog: u32,
    /// Ping each client after this long without a frame from it, and close
    /// the connection (`GOAWAY(TIMEOUT)`) if the answer takes longer than
    /// --keepalive-timeout; `off` (default): never ping.
    #[arg(long, value_parser = parse_optional_duration, default_value = "off")]
    pub(crate) keepalive: MaybeDuration,
    /// How long a keepalive PING may wait for its answer.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub(crate) keepalive_timeout: Duration,
    /// On encrypted connections, replace the send key (a KEY_UPDATE record)
    /// after this many plaintext bytes under one key (1 to 2^37; default
    /// 2^30). Small values let outside checks see key updates.
    #[arg(long, default_value_t = weft::transform::DEFAULT_REKEY_BYTES,
          value_parser = clap::value_parser!(u64).range(1..=1 << 37))]
    pub(crate) key_update_bytes: u64,
    /// Likewise after this many records under one key (2 to 2^24; default
    /// 2^20), whichever limit comes first.
    #[arg(long, default_value_t = weft::transform::DEFAULT_REKEY_RECORDS,
          value_parser = clap::value_parser!(u64).range(2..=1 << 24))]
    pub(crate) key_update_records: u64,
}

/// A duration, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaybeDuration(pub(crate) Option<Duration>);

/// A duration, or `off` / `none` for none.
fn parse_optional_duration(s: &str) -> Result<MaybeDuration, String> {
    match s.trim() {
        "off" | "none" => Ok(MaybeDuration(None)),
        d => parse_duration(d).map(|d| MaybeDuration(Some(d))),
    }
}

impl ServeLimits {
    /// `config` with these limits.
    pub(crate) fn apply(&self, config: Config) -> Config {
        let n = |v: Option<u32>| v.map(|v| v as usize);
        config
            .idle_timeout(self.idle_timeout.0)
            .progress_timeout(self.progress_timeout.0)
            .handshake_timeout(self.handshake_timeout)
            .max_pending_handshakes(self.max_pending_handshakes as usize)
            .max_connections(n(self.max_connections))
            .max_connections_per_address(n(self.max_connections_per_address))
            .keepalive(self.keepalive.0, self.keepalive_timeout)
            .rekey_after(self.key_update_records, self.key_update_bytes)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::args::{Cli, Command};

    #[test]
    fn serve_limits_parse_with_defaults_and_off() {
        let cli = Cli::try_parse_from(["weft", "serve"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(
            s.limits.idle_timeout.0,
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            (s.limits.backlog, s.limits.max_pending_handshakes),
            (4096, 256)
        );
        assert_eq!(s.limits.max_connections, None);
        let cli = Cli::try_parse_from([
            "weft",
            "serve",
            "--idle-timeout",
            "off",
            "--max-connections",
            "10000",
            "--max-connections-per-address",
            "100",
            "--backlog",
            "4096",
            "--handshake-timeout",
            "2s",
            "--progress-timeout",
            "1m",
        ])
        .unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.limits.idle_timeout.0, None);
        assert_eq!(
            (
                s.limits.max_connections,
                s.limits.max_connections_per_address
            ),
            (Some(10_000), Some(100))
        );
        assert_eq!(s.limits.backlog, 4096);
        assert_eq!(
            s.limits.progress_timeout.0,
            Some(std::time::Duration::from_secs(60))
        );
        assert!(Cli::try_parse_from(["weft", "serve", "--max-connections", "0"]).is_err());
        let _ = s.limits.apply(weft::Config::new());
    }

    /// Keepalive and the key-update interval reach the configuration, so
    /// an outside client can watch pings and KEY_UPDATE records.
    #[test]
    fn keepalive_and_key_update_flags_reach_the_config() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["weft", "serve"];
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Serve(s)) => Ok(s),
                Ok(_) => panic!("not serve"),
                Err(e) => Err(e),
            }
        };
        let s = parse(&[]).unwrap();
        assert_eq!(s.limits.keepalive.0, None);
        let defaults = format!("{:?}", s.limits.apply(weft::Config::new()));
        assert!(defaults.contains("keepalive_interval: None"), "{defaults}");
        let s = parse(&[
            "--keepalive",
            "5s",
            "--keepalive-timeout",
            "2s",
            "--key-update-bytes",
            "4096",
            "--key-update-records",
            "100",
        ])
        .unwrap();
        let config = s.limits.apply(weft::Config::new());
        let rekey = config.handshake_config().rekey;
        assert_eq!((rekey.records, rekey.bytes), (100, 4096));
        let shown = format!("{config:?}");
        assert!(shown.contains("keepalive_interval: Some(5s)"), "{shown}");
        assert!(shown.contains("keepalive_timeout: 2s"), "{shown}");
        for bad in [
            &["--key-update-bytes", "0"][..],
            &["--key-update-records", "1"],
            &["--keepalive", "soon"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    /// `weft call --timeout` against a server that completes TCP connects
    /// (its listen backlog) but never answers: it fails at the timeout, not
    /// at the 10 s handshake default. Paused clock: the runtime jumps to the
    /// next timer once nothing else can run.
    #[tokio::test(start_paused = true)]
    async fn call_timeout_bounds_the_handshake_against_a_stopped_server() {
        let stopped = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = stopped.local_addr().unwrap().to_string();
        let cli = Cli::try_parse_from([
            "weft",
            "call",
            "echo",
            "--addr",
            &addr,
            "--timeout",
            "2s",
            "--encrypt",
            "off",
        ])
        .unwrap();
        let Command::Call(a) = cli.command else {
            panic!("not call")
        };
        let start = tokio::time::Instant::now();
        let e = crate::call(a).await.unwrap_err();
        let waited = start.elapsed();
        assert!(
            e.contains("timed out") || e.starts_with("DEADLINE_EXCEEDED"),
            "{e}"
        );
        assert!(
            waited >= std::time::Duration::from_secs(2)
                && waited < std::time::Duration::from_secs(10),
            "{waited:?}"
        );
        drop(stopped);
    }
}
