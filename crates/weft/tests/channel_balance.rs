//! The channel over many endpoints: a discovery stream that adds and
//! removes endpoints, three servers with one killed and one draining, and
//! three with one refusing every stream and one draining.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use weft::channel::Change;
use weft::{Backoff, CallOptions, Channel, Config, Endpoint, Listener};

mod support;
use support::{Proxy, counted_router, serve_router};

/// A discovery stream fed by the test.
struct Feed(tokio::sync::mpsc::UnboundedReceiver<Change<&'static str, Endpoint>>);

impl futures_core::Stream for Feed {
    type Item = Change<&'static str, Endpoint>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

fn memory_endpoint(name: &str, hits: Arc<AtomicUsize>) -> Endpoint {
    Endpoint::from_fn(name, move || {
        let router = counted_router(hits.clone());
        async move { weft::memory(router, &Config::new()).await }
    })
}

async fn echo(ch: &Channel) {
    let b = Bytes::from_static(b"x");
    assert_eq!(ch.unary("echo", b.clone()).await.unwrap(), b);
}

fn load(h: &AtomicUsize) -> usize {
    h.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_discovery_stream_adds_and_removes_endpoints() {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let channel = Channel::builder().balance(Feed(rx));
    let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    tx.send(Change::Insert("a", memory_endpoint("a", a.clone())))
        .unwrap();
    for _ in 0..20 {
        echo(&channel).await;
    }
    assert_eq!((load(&a), load(&b)), (20, 0));
    tx.send(Change::Insert("b", memory_endpoint("b", b.clone())))
        .unwrap();
    // Once b is connected, the balancer spreads calls over both.
    for _ in 0..200 {
        echo(&channel).await;
        if load(&b) > 0 && load(&a) > 20 {
            break;
        }
    }
    assert!(
        load(&b) > 0 && load(&a) > 20,
        "a {} b {}",
        load(&a),
        load(&b)
    );
    tx.send(Change::Remove("a")).unwrap();
    let (a_before, b_before) = (load(&a), load(&b));
    for _ in 0..50 {
        echo(&channel).await;
    }
    assert_eq!(load(&a), a_before, "a removed: no more calls");
    assert_eq!(load(&b), b_before + 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_one_killed_one_draining_lose_nothing() {
    let hits: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let mut servers = Vec::new();
    for h in &hits {
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        servers.push(serve_router(
            listener,
            h.clone(),
            Duration::from_millis(300),
        ));
    }
    // Server 0 is reached through a proxy that will be killed.
    let mut proxy = Proxy::start("127.0.0.1:0", servers[0].addr.clone()).await;
    let config = Config::new();
    let addrs = [
        proxy.addr.clone(),
        servers[1].addr.clone(),
        servers[2].addr.clone(),
    ];
    let endpoints = addrs.iter().map(|a| Endpoint::new(a, &config).unwrap());
    let channel = Channel::builder()
        .backoff(Backoff::new().base(Duration::from_millis(50)))
        .health_check(Some(Duration::from_millis(20)))
        .balance_list(endpoints);
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (ch, done) = (channel.clone(), done.clone());
        tasks.spawn(async move {
            let mut failed = Vec::new();
            while done.fetch_add(1, Ordering::SeqCst) < 4000 {
                // The kill cuts calls in flight; an idempotent call is resent.
                let opts = CallOptions::new()
                    .timeout(Duration::from_secs(10))
                    .idempotent();
                if let Err(e) = ch.unary_with("slow", Bytes::from_static(b"x"), &opts).await {
                    failed.push(e);
                }
            }
            failed
        });
    }
    let all_served = || hits.iter().all(|h| load(h) > 0).then_some(());
    weft_testkit::eventually(all_served, || "all three served").await;
    proxy.kill();
    let draining = servers.remove(1).stop();
    let mut failed = Vec::new();
    while let Some(r) = tasks.join_next().await {
        failed.extend(r.unwrap());
    }
    assert!(failed.is_empty(), "{failed:?}");
    draining.await.unwrap();
    // Every later call goes to the one server left.
    let before: Vec<usize> = hits.iter().map(|h| load(h)).collect();
    for _ in 0..100 {
        echo(&channel).await;
    }
    let after: Vec<usize> = hits.iter().map(|h| load(h)).collect();
    assert_eq!(
        (after[0], after[1], after[2]),
        (before[0], before[1], before[2] + 100)
    );
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_reporting_not_serving_gets_no_calls() {
    let (sick, well) = (weft::Health::new(), weft::Health::new());
    let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let endpoint = |name: &str, health: &weft::Health, hits: &Arc<AtomicUsize>| {
        let (health, hits) = (health.clone(), hits.clone());
        Endpoint::from_fn(name, move || {
            let router = health.install(counted_router(hits.clone()));
            async move { weft::memory(router, &Config::new()).await }
        })
    };
    let channel = Channel::builder()
        .health_check(Some(Duration::from_millis(100)))
        .balance_list([endpoint("a", &sick, &a), endpoint("b", &well, &b)]);
    for _ in 0..200 {
        echo(&channel).await;
        if load(&a) > 0 && load(&b) > 0 {
            break;
        }
    }
    assert!(load(&a) > 0 && load(&b) > 0, "both used while serving");
    sick.set("", weft::Serving::NotServing);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let before = load(&a);
    for _ in 0..50 {
        echo(&channel).await;
    }
    assert_eq!(load(&a), before, "the NOT_SERVING endpoint is ejected");
    sick.set("", weft::Serving::Serving);
    tokio::time::sleep(Duration::from_millis(250)).await;
    for _ in 0..200 {
        echo(&channel).await;
        if load(&a) > before {
            break;
        }
    }
    assert!(load(&a) > before, "back once SERVING again");
}

/// One server's accept loop is gone, so its open connections refuse every
/// new stream at once (the fastest answer of the three), and another
/// drains. Without outlier detection power-of-two-choices keeps picking the
/// refusing one (fewest calls in flight), the retry budget runs out and
/// calls fail; with it, the refusing endpoint is ejected and probed back,
/// and the one healthy server takes the load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_one_refusing_every_stream_one_draining_lose_nothing() {
    const RUN: Duration = Duration::from_secs(6);
    let hits: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let mut servers = Vec::new();
    for h in &hits {
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        servers.push(serve_router(listener, h.clone(), Duration::ZERO));
    }
    let config = Config::new();
    let endpoints = servers
        .iter()
        .map(|s| Endpoint::new(&s.addr, &config).unwrap());
    let channel = Channel::builder().balance_list(endpoints);
    let end = tokio::time::Instant::now() + RUN;
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (ch, ok, failed) = (channel.clone(), ok.clone(), failed.clone());
        tasks.spawn(async move {
            let mut first = None;
            while tokio::time::Instant::now() < end {
                let opts = CallOptions::new()
                    .timeout(Duration::from_secs(2))
                    .idempotent();
                match ch.unary_with("echo", Bytes::from_static(b"x"), &opts).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        first.get_or_insert(e);
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            first
        });
    }
    let all_served = || hits.iter().all(|h| load(h) > 0).then_some(());
    weft_testkit::eventually(all_served, || "all three served").await;
    let draining = servers.pop().unwrap().stop();
    servers.pop().unwrap().abort();
    let (ok_before, healthy_before) = (load(&ok), load(&hits[0]));
    let mut first = None;
    let bound = RUN + Duration::from_secs(5);
    while let Some(r) = tokio::time::timeout(bound, tasks.join_next())
        .await
        .expect("the calls end with the run")
    {
        first = first.or(r.unwrap());
    }
    let (ok, failed) = (load(&ok), load(&failed));
    assert_eq!(failed, 0, "{ok} ok; the first failure: {first:?}");
    // The healthy server took the load: every call after the abort but
    // the few the draining one took before its GOAWAY reached the client.
    let (since, healthy) = (ok - ok_before, load(&hits[0]) - healthy_before);
    eprintln!(
        "{ok} ok, {failed} failed; {healthy} of the {since} after the abort on the healthy server"
    );
    assert!(
        healthy * 100 >= since * 99 && since > 1000,
        "{healthy} of {since} calls on the healthy server"
    );
    draining.await.unwrap();
}
