//! The `weft` binary: `weft serve` runs the demo service, `weft call`
//! calls a method, `weft load` runs a load test (by default against an
//! in-process server, encryption and compression on, for about 5 s),
//! `weft keygen` writes a key pair for `--key`.

use std::process::ExitCode;

use clap::Parser as _;
use weft::{Bytes, CallOptions, Config, EncryptionPolicy, Listener};

mod alloc;
mod args;
mod demo;
mod keys;
mod load;
mod metrics;
mod report;
mod serve;

use args::{CallArgs, Cli, Command, KeygenArgs, LoadArgs, Security, ServeArgs};

/// The endpoint configuration of the security flags: `--encrypt on`
/// requires encryption (the handshake fails against a peer with it off).
pub(crate) fn security_config(s: &Security) -> Result<Config, String> {
    let mut c = Config::new()
        .encryption(if s.encrypt.on() {
            EncryptionPolicy::Required
        } else {
            EncryptionPolicy::Off
        })
        .compression(s.compress.on());
    if let Some(k) = s.key()? {
        // `Config` keeps its own zeroizing copy; `k` is zeroed as it drops.
        c = c.psk(k.0);
    }
    if let Some(path) = &s.key {
        c = c.identity(keys::read_private_key(path)?);
    }
    Ok(c)
}

/// `config` with the server's public key pinned, if one was given.
fn pinned(config: Config, server_key: Option<&str>) -> Result<Config, String> {
    match server_key {
        Some(hex) => Ok(config.server_key(keys::parse_public_key(hex)?)),
        None => Ok(config),
    }
}

fn keygen(a: &KeygenArgs) -> Result<(), String> {
    let public = keys::keygen(&a.file)?;
    eprintln!(
        "weft: private key written to {} (mode 0600)",
        a.file.display()
    );
    println!("{public}");
    Ok(())
}

async fn serve(a: ServeArgs) -> Result<(), String> {
    let mut config = a.limits.apply(security_config(&a.security)?);
    if let Some(path) = a.allow {
        let list = keys::watched_allow_list(path)?;
        println!("weft: {} client keys allowed", list.len());
        config = config.allow(list);
    }
    if let Some(k) = &config.handshake_config().identity {
        println!(
            "weft: server key {}",
            weft::transform::KeyHex(&k.public_key())
        );
    }
    if let Some(m) = &a.metrics {
        let at = metrics::install(m)?;
        println!("weft: metrics on http://{at}/metrics");
    }
    let listener = Listener::bind_with_backlog(&a.addr, a.limits.backlog)
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("weft: serving on {addr}; methods: {}", demo::METHODS);
    println!("weft: Ctrl-C stops (calls in flight finish)");
    tokio::spawn(alloc::log_every(std::time::Duration::from_secs(1)));
    let health = weft::Health::new();
    let router = health.install(demo::router());
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("weft: shutting down");
    };
    let shutdown = health.shutdown_after(signal, a.health_grace);
    weft::serve(listener, router, config, shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// `weft call --health ADDR`: prints the answer; `NOT_SERVING` is a failure.
async fn health(
    addr: &str,
    service: &str,
    config: &Config,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let client = weft::connect(addr, config)
        .await
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(timeout, weft::health::check(&client, service))
        .await
        .map_err(|_| format!("no health answer within {timeout:?}"))?
        .map_err(|s| s.to_string())?;
    println!("{}", answer.as_str());
    match answer {
        weft::Serving::Serving => Ok(()),
        weft::Serving::NotServing => Err(format!("{addr} is not serving")),
    }
}

async fn call(a: CallArgs) -> Result<(), String> {
    // --timeout bounds the connect and the handshake too (a stopped server
    // still completes TCP connects from its listen backlog).
    let config = pinned(security_config(&a.security)?, a.server_key.as_deref())?
        .handshake_timeout(a.timeout);
    if let Some(addr) = &a.health {
        return health(addr, &a.service, &config, a.timeout).await;
    }
    let method = a.method.as_deref().unwrap_or_default();
    // Interactive: an unreachable server is an error now, not a wait.
    let client = weft::Channel::builder()
        .fail_fast(true)
        .connect_lazy(&a.addr, &config)
        .map_err(|e| e.to_string())?;
    let opts = CallOptions::new().timeout(a.timeout);
    let body = Bytes::from(a.body.into_bytes());
    let fail = |s: weft::Status| format!("{s}");
    if a.stream {
        let mut s = client
            .server_streaming(method, body, &opts)
            .await
            .map_err(fail)?;
        while let Some(m) = s.message().await.map_err(fail)? {
            println!("{}", String::from_utf8_lossy(&m));
        }
    } else {
        let r = client.unary_with(method, body, &opts).await.map_err(fail)?;
        println!("{}", String::from_utf8_lossy(&r));
    }
    Ok(())
}

async fn load(a: LoadArgs) -> Result<(), String> {
    let config = pinned(security_config(&a.security)?, a.server_key.as_deref())?;
    let out = load::run(&a, config).await?;
    if a.json {
        let text = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", out.render());
    }
    if let Some(path) = &a.report {
        std::fs::write(path, out.html())
            .map_err(|e| format!("--report {}: {e}", path.display()))?;
    }
    out.verdict(&a)
}

/// The log filter when `RUST_LOG` is unset: warnings, and for `weft serve`
/// also each failed handshake with its peer and reason (a rejected key
/// names the key).
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Serve(_) => "warn,weft::net=debug,weft::allow=info",
        _ => "warn",
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default: [`default_log_filter`]).
fn init_tracing(command: &Command) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log_filter(command)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli.command);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weft: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let r = rt.block_on(async {
        match cli.command {
            Command::Serve(a) => serve(a).await,
            Command::Call(a) => call(a).await,
            Command::Load(a) => load(a).await,
            Command::Keygen(a) => keygen(&a),
        }
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_flags_map_to_policies() {
        let cli =
            Cli::try_parse_from(["weft", "load", "--encrypt", "off", "--compress", "off"]).unwrap();
        let Command::Load(l) = cli.command else {
            panic!("load")
        };
        let c = security_config(&l.security).unwrap();
        assert_eq!(c.handshake_config().offer.encryption, EncryptionPolicy::Off);
        assert!(!c.handshake_config().offer.compression);
        let psk = "ab".repeat(32);
        let cli = Cli::try_parse_from(["weft", "load", "--psk", &psk]).unwrap();
        let Command::Load(l) = cli.command else {
            panic!("load")
        };
        let c = security_config(&l.security).unwrap();
        assert_eq!(
            c.handshake_config().offer.encryption,
            EncryptionPolicy::Required
        );
        assert_eq!(c.handshake_config().psk, Some([0xab; 32].into()));
    }

    #[test]
    fn serve_logs_failed_handshakes_by_default_and_the_others_only_warn() {
        let filter =
            |argv: &[&str]| default_log_filter(&Cli::try_parse_from(argv).unwrap().command);
        assert_eq!(
            filter(&["weft", "serve"]),
            "warn,weft::net=debug,weft::allow=info"
        );
        assert_eq!(filter(&["weft", "load"]), "warn");
        assert_eq!(filter(&["weft", "call", "echo"]), "warn");
    }

    #[tokio::test]
    async fn call_and_stream_against_a_served_demo() {
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = security_config(
            &Cli::try_parse_from(["weft", "load"])
                .map(|c| match c.command {
                    Command::Load(l) => l.security,
                    _ => unreachable!("load"),
                })
                .unwrap(),
        )
        .unwrap();
        let health = weft::Health::new();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = health.shutdown_after(
            async {
                let _ = stopped.await;
            },
            std::time::Duration::from_secs(60),
        );
        tokio::spawn(weft::serve(
            listener,
            health.install(demo::router()),
            cfg.clone(),
            shutdown,
        ));
        let parse = |argv: &[&str]| match Cli::try_parse_from(argv).unwrap().command {
            Command::Call(c) => c,
            _ => unreachable!("call"),
        };
        call(parse(&[
            "weft",
            "call",
            "add",
            "{\"a\":1,\"b\":2}",
            "--addr",
            &addr,
        ]))
        .await
        .unwrap();
        call(parse(&[
            "weft", "call", "count", "3", "--stream", "--addr", &addr,
        ]))
        .await
        .unwrap();
        let e = call(parse(&["weft", "call", "nope", "--addr", &addr]))
            .await
            .unwrap_err();
        assert!(e.starts_with("UNIMPLEMENTED"), "{e}");
        let e = call(parse(&[
            "weft", "call", "count", "x", "--stream", "--addr", &addr,
        ]))
        .await
        .unwrap_err();
        assert!(e.starts_with("INVALID_ARGUMENT"), "{e}");
        let e = call(parse(&["weft", "call", "echo", "--addr", "127.0.0.1:1"]))
            .await
            .unwrap_err();
        assert!(e.contains("could not connect"), "{e}");
        let h = parse(&["weft", "call", "--health", &addr]);
        assert_eq!(h.method, None);
        call(h).await.unwrap();
        let e = call(parse(&[
            "weft",
            "call",
            "--health",
            &addr,
            "--service",
            "db",
        ]))
        .await
        .unwrap_err();
        assert!(e.starts_with("NOT_FOUND"), "{e}");
        // Shutdown started: NOT_SERVING (during the grace), a failure.
        stop.send(()).unwrap();
        tokio::task::yield_now().await;
        let e = call(parse(&["weft", "call", "--health", &addr]))
            .await
            .unwrap_err();
        assert!(e.contains("not serving"), "{e}");
        assert!(
            Cli::try_parse_from(["weft", "call"]).is_err(),
            "a method or --health"
        );
    }
}
