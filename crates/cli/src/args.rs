//! Command-line arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// weft: a fast, secure multiplexed RPC stack. `weft load` with no
/// arguments runs a 5-second load test against an in-process server.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the demo service (methods: echo, ping, add, count, status).
    Serve(ServeArgs),
    /// Call one method and print the response.
    Call(CallArgs),
    /// Run a load test (in-process server unless --addr is given).
    Load(LoadArgs),
    /// Write a new key pair: the private key to FILE (mode 0600), the
    /// public key, as hex, to standard output.
    Keygen(KeygenArgs),
}

/// `weft keygen`.
#[derive(Debug, Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the private key (never over an existing file).
    pub(crate) file: PathBuf,
}

/// A switch given as `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl OnOff {
    /// Whether it is on.
    pub(crate) fn on(self) -> bool {
        self == OnOff::On
    }
}

/// Transport security and compression, shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub(crate) struct Security {
    /// Encryption: `on` requires it (the peer must agree), `off` refuses it.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) encrypt: OnOff,
    /// Per-frame deflate, used when both sides enable it.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) compress: OnOff,
    /// Pre-shared key, 64 hex digits (authenticates both peers). Also read
    /// from the WEFT_PSK environment variable, which keeps it out of `ps`.
    #[arg(long, value_parser = parse_psk)]
    pub(crate) psk: Option<Psk>,
    /// This side's private key file (from `weft keygen`): the handshake
    /// becomes Noise XX, or IK with --server-key; the peer needs a key too.
    #[arg(long, value_name = "FILE")]
    pub(crate) key: Option<PathBuf>,
}

/// A 32-byte pre-shared key. Debug never prints it; zeroed on drop.
#[derive(Clone, PartialEq, Eq, zeroize::Zeroize, zeroize::ZeroizeOnDrop)]
pub(crate) struct Psk(pub [u8; 32]);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(..)")
    }
}

/// Parses 64 hex digits into a key.
pub(crate) fn parse_psk(s: &str) -> Result<Psk, String> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return Err("a pre-shared key is 64 hex digits (32 bytes)".into());
    }
    // Parsed in place: a failure part-way drops (and zeroes) the bytes read.
    let mut key = Psk([0u8; 32]);
    for (i, k) in key.0.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .map_err(|_| "a pre-shared key is 64 hex digits (32 bytes)".to_string())?;
    }
    Ok(key)
}

impl Security {
    /// The key from `--psk`, else from `WEFT_PSK` (our copy of the
    /// variable's text is zeroed; the process environment keeps its own).
    pub(crate) fn key(&self) -> Result<Option<Psk>, String> {
        if let Some(k) = &self.psk {
            return Ok(Some(k.clone()));
        }
        match std::env::var("WEFT_PSK").map(zeroize::Zeroizing::new) {
            Ok(v) => parse_psk(&v)
                .map(Some)
                .map_err(|e| format!("WEFT_PSK: {e}")),
            Err(_) => Ok(None),
        }
    }
}

/// `weft serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (TCP `host:port`, or `unix:/path`).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub(crate) addr: String,
    /// On shutdown, report `NOT_SERVING` on `weft.health/check` for this
    /// long before sending `GOAWAY` (lets balancers move calls away).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub(crate) health_grace: Duration,
    /// Serve Prometheus metrics (text format) on this `ip:port`.
    #[arg(long)]
    pub(crate) metrics: Option<String>,
    /// Client public keys allowed (one hex key per line, `#` comments;
    /// needs --key). Re-read when the file changes. Default: any client
    /// key pair.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub(crate) allow: Option<PathBuf>,
    /// Security and compression.
    #[command(flatten)]
    pub(crate) security: Security,
    /// Admission limits and timeouts.
    #[command(flatten)]
    pub(crate) limits: crate::serve::ServeLimits,
}

/// `weft call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The method, e.g. `echo`, `add`, `count`.
    #[arg(required_unless_present = "health")]
    pub(crate) method: Option<String>,
    /// The request body (JSON text for the demo's JSON methods).
    #[arg(default_value = "")]
    pub(crate) body: String,
    /// Server address (TCP `host:port`, or `unix:/path`).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub(crate) addr: String,
    /// Call timeout, e.g. `500ms`, `2s`; it also bounds the connect and the
    /// handshake.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub(crate) timeout: Duration,
    /// The method streams its response: print each message.
    #[arg(long)]
    pub(crate) stream: bool,
    /// Ask the server at ADDR for its health (`weft.health/check`) and
    /// print `SERVING` or `NOT_SERVING` (then exit with failure) instead
    /// of calling a method.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["method", "stream"])]
    pub(crate) health: Option<String>,
    /// With --health: the service to ask about (default: the whole server).
    #[arg(long, default_value = "", requires = "health")]
    pub(crate) service: String,
    /// The server's public key (64 hex digits), pinned; needs --key.
    #[arg(long, value_name = "HEX", requires = "key")]
    pub(crate) server_key: Option<String>,
    /// Security and compression.
    #[command(flatten)]
    pub(crate) security: Security,
}

/// `weft load`.
#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// Calls in flight at once, spread over the connections (with --sweep:
    /// the largest step).
    #[arg(long, default_value_t = 64, allow_hyphen_values = true,
          value_parser = parse_concurrency)]
    pub(crate) concurrency: u32,
    /// Connections to open.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true,
          value_parser = parse_connections)]
    pub(crate) connections: u32,
    /// How long to measure, e.g. `5s` (with --sweep: each step).
    #[arg(long, value_parser = parse_positive_duration, default_value = "5s",
          allow_hyphen_values = true)]
    pub(crate) duration: Duration,
    /// Stop after this many calls instead of after --duration.
    #[arg(long, conflicts_with = "duration", allow_hyphen_values = true,
          value_parser = parse_calls)]
    pub(crate) calls: Option<u64>,
    /// Open loop: start this many calls per second whatever the latency
    /// (latency counts from each call's intended start, as wrk2 does).
    /// Without it, the loop is closed: each of --concurrency workers starts
    /// its next call when the last one returns.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub(crate) rate: Option<f64>,
    /// Run steps of doubling concurrency (1, 2, 4, … up to --concurrency),
    /// or with --rate of rising rates (¼× to 1½× of it), each for
    /// --duration, and print one row per step with the knee marked.
    #[arg(long, conflicts_with = "calls")]
    pub(crate) sweep: bool,
    /// Run this long before measuring (connections warm, caches hot).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub(crate) warmup: Option<Duration>,
    /// Per-call timeout (default: the run's duration, at least 1 s; 10 s
    /// with --calls). A call past it fails DEADLINE_EXCEEDED.
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// The method to call.
    #[arg(long, default_value = "echo")]
    pub(crate) method: String,
    /// The request body, as text (default: a --payload-size JSON-ish body).
    #[arg(long, conflicts_with_all = ["body_file", "payload_size"])]
    pub(crate) body: Option<String>,
    /// Read the request body from this file.
    #[arg(long, conflicts_with = "payload_size")]
    pub(crate) body_file: Option<PathBuf>,
    /// A custom metadata entry `key=value` sent with every call (repeatable).
    #[arg(long, value_parser = parse_metadata)]
    pub(crate) metadata: Vec<(String, String)>,
    /// Request payload size in bytes (the `echo` method returns it).
    #[arg(long, default_value_t = 64, allow_hyphen_values = true)]
    pub(crate) payload_size: usize,
    /// Exit non-zero when more than this fraction of calls fail (`0.01` or `1%`).
    #[arg(long, value_parser = parse_fraction, allow_hyphen_values = true)]
    pub(crate) max_error_rate: Option<f64>,
    /// Exit non-zero when the p99 latency is not under this, e.g. `2ms`.
    #[arg(long, value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub(crate) p99_under: Option<Duration>,
    /// Print the report as JSON (arguments, histogram and time series too).
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the report with plots to this HTML file.
    #[arg(long)]
    pub(crate) report: Option<PathBuf>,
    /// Load a remote `weft serve` instead of an in-process server.
    #[arg(long)]
    pub(crate) addr: Option<String>,
    /// The server's public key (64 hex digits), pinned; needs --key.
    #[arg(long, value_name = "HEX", requires = "key")]
    pub(crate) server_key: Option<String>,
    /// Security and compression.
    #[command(flatten)]
    pub(crate) security: Security,
}

/// A whole number in `lo..=hi`.
fn count(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a whole number from {lo} to {hi}")),
    }
}

/// `--concurrency`: 1 to 100,000.
pub(crate) fn parse_concurrency(s: &str) -> Result<u32, String> {
    count(s, 1, 100_000).map(|n| n as u32)
}

/// `--connections`: 1 to 1024.
pub(crate) fn parse_connections(s: &str) -> Result<u32, String> {
    count(s, 1, 1024).map(|n| n as u32)
}

/// `--calls`: at least 1.
pub(crate) fn parse_calls(s: &str) -> Result<u64, String> {
    count(s, 1, u64::MAX)
}

/// A duration that must be more than zero.
pub(crate) fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!(
            "{s:?} is zero: give a positive duration such as 500ms or 5s"
        ));
    }
    Ok(d)
}

/// A call rate: a positive, finite number of calls per second.
pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e9 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate: give calls per second, a number above 0 (at most 1e9)"
        )),
    }
}

/// A fraction `0.01` or a percentage `1%`, in 0..=1.
pub(crate) fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{s:?} is not a fraction in 0..1 (e.g. 0.01) or a percentage (e.g. 1%)"
        )),
    }
}

/// A metadata entry `key=value` (key 1..=255 bytes).
pub(crate) fn parse_metadata(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && k.len() <= 255 => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not key=value with a 1-255 byte key")),
    }
}

/// Parses `250ms`, `5s`, `2m`, `1h` or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if s.starts_with('-') {
        return Err(format!(
            "{s:?} is negative: give a duration such as 500ms, 5s, 2m"
        ));
    }
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration such as 500ms, 5s, 2m"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" | "µs" => n / 1e6,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("10us").unwrap(), Duration::from_micros(10));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1e400").is_err());
    }

    #[test]
    fn psk_parsing_and_redaction() {
        let hex = "00".repeat(31) + "ff";
        let k = parse_psk(&hex).unwrap();
        assert_eq!(k.0[31], 0xff);
        assert_eq!(format!("{k:?}"), "Psk(..)");
        assert!(parse_psk("abc").is_err());
        assert!(parse_psk(&"zz".repeat(32)).is_err());
        assert!(parse_psk(&"é".repeat(32)).is_err());
        // Our copies of the key are zeroed when dropped (the trait is the
        // guarantee; `zeroize` is what drop runs).
        fn zeroed_on_drop<T: zeroize::ZeroizeOnDrop>(_: &T) {}
        zeroed_on_drop(&k);
        let mut k = k;
        zeroize::Zeroize::zeroize(&mut k);
        assert_eq!(k.0, [0; 32]);
    }

    #[test]
    fn load_defaults_and_flags() {
        let cli = Cli::try_parse_from(["weft", "load"]).unwrap();
        let Command::Load(l) = cli.command else {
            panic!("not load")
        };
        assert_eq!((l.concurrency, l.connections), (64, 1));
        assert_eq!(l.duration, Duration::from_secs(5));
        assert!(l.security.encrypt.on() && l.security.compress.on());
        assert!(l.addr.is_none() && l.calls.is_none() && !l.json);

        let cli = Cli::try_parse_from([
            "weft",
            "load",
            "--concurrency",
            "8",
            "--connections",
            "2",
            "--calls",
            "1000",
            "--payload-size",
            "1024",
            "--encrypt",
            "off",
            "--compress",
            "off",
            "--json",
            "--addr",
            "127.0.0.1:9",
        ])
        .unwrap();
        let Command::Load(l) = cli.command else {
            panic!("not load")
        };
        assert_eq!((l.concurrency, l.connections, l.calls), (8, 2, Some(1000)));
        assert_eq!(l.payload_size, 1024);
        assert!(!l.security.encrypt.on() && !l.security.compress.on() && l.json);
        assert!(Cli::try_parse_from(["weft", "load", "--concurrency", "0"]).is_err());
        assert!(Cli::try_parse_from(["weft", "load", "--calls", "5", "--duration", "1s"]).is_err());
        assert!(Cli::try_parse_from(["weft", "load", "--encrypt", "maybe"]).is_err());
    }

    #[test]
    fn bad_load_values_are_refused_clearly() {
        let err = |argv: &[&str]| {
            let mut v = vec!["weft", "load"];
            v.extend_from_slice(argv);
            Cli::try_parse_from(v).unwrap_err().to_string()
        };
        assert!(err(&["--duration", "0"]).contains("is zero"));
        assert!(err(&["--duration", "0s"]).contains("is zero"));
        assert!(err(&["--duration", "-1s"]).contains("is negative"));
        assert!(err(&["--calls", "0"]).contains("\"0\" is not a whole number from 1"));
        assert!(err(&["--calls", "-5"]).contains("\"-5\" is not a whole number from 1"));
        assert!(err(&["--concurrency", "-1"]).contains("from 1 to 100000"));
        assert!(err(&["--connections", "2000"]).contains("from 1 to 1024"));
        assert!(err(&["--rate", "0"]).contains("is not a rate"));
        assert!(err(&["--rate", "-10"]).contains("is not a rate"));
        assert!(err(&["--rate", "inf"]).contains("is not a rate"));
        assert!(err(&["--timeout", "0ms"]).contains("is zero"));
        assert!(err(&["--max-error-rate", "150%"]).contains("not a fraction"));
        assert!(err(&["--metadata", "novalue"]).contains("key=value"));
        assert!(err(&["--body", "x", "--payload-size", "9"]).contains("cannot be used with"));
    }

    #[test]
    fn load_modes_and_thresholds_parse() {
        let cli = Cli::try_parse_from([
            "weft",
            "load",
            "--rate",
            "1500",
            "--sweep",
            "--warmup",
            "1s",
            "--method",
            "add",
            "--body",
            "{}",
            "--metadata",
            "k=v=w",
            "--max-error-rate",
            "1%",
            "--p99-under",
            "2ms",
            "--timeout",
            "250ms",
        ])
        .unwrap();
        let Command::Load(l) = cli.command else {
            panic!("not load")
        };
        assert_eq!(l.rate, Some(1500.0));
        assert!(l.sweep);
        assert_eq!(l.warmup, Some(Duration::from_secs(1)));
        assert_eq!((l.method.as_str(), l.body.as_deref()), ("add", Some("{}")));
        assert_eq!(l.metadata, [("k".to_string(), "v=w".to_string())]);
        assert_eq!(l.max_error_rate, Some(0.01));
        assert_eq!(l.p99_under, Some(Duration::from_millis(2)));
        assert_eq!(l.timeout, Some(Duration::from_millis(250)));
    }

    #[test]
    fn serve_and_call() {
        let cli = Cli::try_parse_from(["weft", "serve", "--addr", "unix:/tmp/x.sock"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.addr, "unix:/tmp/x.sock");
        let cli = Cli::try_parse_from([
            "weft",
            "call",
            "add",
            "{\"a\":1,\"b\":2}",
            "--timeout",
            "1s",
        ])
        .unwrap();
        let Command::Call(c) = cli.command else {
            panic!("not call")
        };
        assert_eq!(
            (c.method.as_deref().unwrap(), c.body.as_str()),
            ("add", "{\"a\":1,\"b\":2}")
        );
        assert_eq!(c.timeout, Duration::from_secs(1));
        assert!(!c.stream);
    }
}
