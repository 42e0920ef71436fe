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
    /// Serve the demo service (methods: echo, add, count).
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

/// A 32-byte pre-shared key. Debug never prints it.
#[derive(Clone, PartialEq, Eq)]
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
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .map_err(|_| "a pre-shared key is 64 hex digits (32 bytes)".to_string())?;
    }
    Ok(Psk(key))
}

impl Security {
    /// The key from `--psk`, else from `WEFT_PSK`.
    pub(crate) fn key(&self) -> Result<Option<[u8; 32]>, String> {
        if let Some(k) = &self.psk {
            return Ok(Some(k.0));
        }
        match std::env::var("WEFT_PSK") {
            Ok(v) => parse_psk(&v)
                .map(|k| Some(k.0))
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
    /// Client public keys allowed (one hex key per line, `#` comments;
    /// needs --key). Re-read when the file changes. Default: any client
    /// key pair.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub(crate) allow: Option<PathBuf>,
    /// Security and compression.
    #[command(flatten)]
    pub(crate) security: Security,
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
    /// Call timeout, e.g. `500ms`, `2s`.
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
    /// Calls in flight at once, spread over the connections.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) concurrency: u32,
    /// Connections to open.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) connections: u32,
    /// How long to run, e.g. `5s` (ignored with --calls).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub(crate) duration: Duration,
    /// Stop after this many calls instead of after --duration.
    #[arg(long, conflicts_with = "duration")]
    pub(crate) calls: Option<u64>,
    /// Request payload size in bytes (the `echo` method returns it).
    #[arg(long, default_value_t = 64)]
    pub(crate) payload_size: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
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

/// Parses `250ms`, `5s`, `2m`, `1h` or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
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
