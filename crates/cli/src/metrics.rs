//! `weft serve --metrics ADDR`: the server's metrics (see weft-rpc's
//! `meter` module) in Prometheus text format at `http://ADDR/metrics`
//! (any path answers), through `metrics-exporter-prometheus`.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Upper bounds of the call-duration histogram buckets, seconds: 50 µs
/// to 10 s, about three per decade.
const DURATION_BUCKETS: [f64; 16] = [
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
    1.0, 2.5, 10.0,
];

/// Installs the global recorder and starts the HTTP listener on `addr`.
/// Must run inside the tokio runtime, before serving (handles registered
/// earlier stay no-ops).
pub(crate) fn install(addr: &str) -> Result<SocketAddr, String> {
    let at: SocketAddr = addr
        .parse()
        .map_err(|_| format!("--metrics {addr:?}: give an ip:port such as 127.0.0.1:9100"))?;
    PrometheusBuilder::new()
        .with_http_listener(at)
        .set_buckets_for_metric(
            Matcher::Suffix("duration_seconds".into()),
            &DURATION_BUCKETS,
        )
        .and_then(|b| b.install())
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use weft::{Bytes, Config, Listener};

    async fn scrape(at: std::net::SocketAddr) -> String {
        let mut s = tokio::net::TcpStream::connect(at).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).await.unwrap();
        text
    }

    /// The line of `metric` whose labels contain all of `labels`, parsed.
    fn value(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
        text.lines()
            .filter(|l| l.starts_with(metric) && labels.iter().all(|x| l.contains(x)))
            .find_map(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scrape_shows_calls_by_method_and_code_latency_and_connections() {
        // A free port (the exporter does not report the one it bound).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let at = super::install(&format!("127.0.0.1:{port}")).unwrap();
        assert!(
            super::install("not an address")
                .unwrap_err()
                .contains("ip:port")
        );

        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(weft::serve(
            listener,
            crate::demo::router(),
            Config::new(),
            std::future::pending(),
        ));
        let c = weft::connect(&addr, &Config::new()).await.unwrap();
        for _ in 0..3 {
            c.unary("add", Bytes::from_static(br#"{"a":1,"b":2}"#))
                .await
                .unwrap();
        }
        let e = c.unary("add", Bytes::from_static(b"x")).await.unwrap_err();
        assert_eq!(e.code(), weft::Code::INVALID_ARGUMENT);

        let text = scrape(at).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        let m = r#"rpc_method="add""#;
        // Other tests in this binary may call `add` too: at least ours.
        assert!(
            value(&text, "weft_rpc_server_handled_total", &[m, r#"code="OK""#]).unwrap() >= 3.0,
            "{text}"
        );
        assert!(
            value(
                &text,
                "weft_rpc_server_handled_total",
                &[m, r#"code="INVALID_ARGUMENT""#]
            )
            .unwrap()
                >= 1.0,
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_server_started_total", &[m]).unwrap() >= 4.0,
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_server_duration_seconds_count", &[m]).unwrap() >= 4.0,
            "{text}"
        );
        assert!(
            text.contains(
                "weft_rpc_server_duration_seconds_bucket{rpc_method=\"add\",le=\"0.00005\"}"
            ),
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_server_received_bytes_total", &[m]).unwrap() >= 3.0 * 13.0,
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_server_connections", &[]).unwrap() >= 1.0,
            "{text}"
        );
        // The client in this process is metered under the mirrored names.
        assert!(
            value(&text, "weft_rpc_client_handled_total", &[m, r#"code="OK""#]).unwrap() >= 3.0,
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_client_duration_seconds_count", &[m]).unwrap() >= 4.0,
            "{text}"
        );
        assert!(
            value(&text, "weft_rpc_client_sent_bytes_total", &[m]).unwrap() >= 3.0 * 17.0,
            "{text}"
        );
    }
}
