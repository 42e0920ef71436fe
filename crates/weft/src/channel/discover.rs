//! Discovery sources: a fixed list, and DNS resolved again on a period.
//! Any `Stream` of [`Change`]s is a source too.

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use tower::discover::Change;

use super::Endpoint;
use crate::{Address, Config, Error};

/// A fixed set of changes, then nothing more.
#[derive(Debug)]
pub(crate) struct Fixed<K> {
    changes: VecDeque<Change<K, Endpoint>>,
}

impl<K> Fixed<K> {
    pub(crate) fn new(changes: VecDeque<Change<K, Endpoint>>) -> Fixed<K> {
        Fixed { changes }
    }
}

impl<K: Unpin> futures_core::Stream for Fixed<K> {
    type Item = Change<K, Endpoint>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // After the list, stay pending: the set is fixed, not ended.
        self.changes
            .pop_front()
            .map_or(Poll::Pending, |c| Poll::Ready(Some(c)))
    }
}

/// Changes sent by a task (the DNS resolver).
#[derive(Debug)]
pub(crate) struct Fed<K> {
    rx: tokio::sync::mpsc::Receiver<Change<K, Endpoint>>,
}

impl<K> futures_core::Stream for Fed<K> {
    type Item = Change<K, Endpoint>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// The changes between the addresses `old` and `new`.
pub(crate) fn diff(
    old: &BTreeSet<String>,
    new: &BTreeSet<String>,
    config: &Config,
) -> Vec<Change<String, Endpoint>> {
    let removed = old.difference(new).map(|a| Change::Remove(a.clone()));
    let added = new.difference(old).filter_map(|a| {
        Endpoint::new(a, config)
            .ok()
            .map(|e| Change::Insert(a.clone(), e))
    });
    removed.chain(added).collect()
}

/// Resolves `host_port` now and every `every`, announcing the addresses
/// that appear and disappear. A failed lookup keeps the last set.
pub(crate) fn dns(host_port: &str, config: &Config, every: Duration) -> Result<Fed<String>, Error> {
    let Address::Tcp(target) = host_port.parse::<Address>()? else {
        return Err(Error::Address(host_port.to_owned()));
    };
    Ok(resolving(config.clone(), every, move || {
        let target = target.clone();
        async move {
            let addrs = tokio::net::lookup_host(&target).await?;
            Ok(addrs.map(|a| a.to_string()).collect())
        }
    }))
}

/// Calls `resolve` now and every `every`, announcing the difference to
/// the last answer, until the receiving side is dropped.
fn resolving<F, Fut>(config: Config, every: Duration, resolve: F) -> Fed<String>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<BTreeSet<String>>> + Send,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let mut known = BTreeSet::new();
        loop {
            match resolve().await {
                Ok(now) => {
                    for change in diff(&known, &now, &config) {
                        if tx.send(change).await.is_err() {
                            return; // the channel is gone
                        }
                    }
                    known = now;
                }
                Err(e) => tracing::debug!(error = %e, "DNS lookup failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = tx.closed() => return,
            }
        }
    });
    Fed { rx }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(a: &[&str]) -> BTreeSet<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn diff_removes_the_gone_and_inserts_the_new() {
        let changes = diff(
            &set(&["10.0.0.1:1", "10.0.0.2:1"]),
            &set(&["10.0.0.2:1", "10.0.0.3:1"]),
            &Config::new(),
        );
        let shown: Vec<String> = changes
            .iter()
            .map(|c| match c {
                Change::Insert(k, e) => format!("+{k}={}", e.name()),
                Change::Remove(k) => format!("-{k}"),
            })
            .collect();
        assert_eq!(shown, ["-10.0.0.1:1", "+10.0.0.3:1=10.0.0.3:1"]);
    }

    #[tokio::test]
    async fn dns_announces_what_localhost_resolves_to() {
        use std::future::poll_fn;
        let mut fed = dns("127.0.0.1:7", &Config::new(), Duration::from_secs(3600)).unwrap();
        let first = poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut fed), cx)).await;
        match first {
            Some(Change::Insert(k, _)) => assert_eq!(k, "127.0.0.1:7"),
            other => panic!("{other:?}"),
        }
        assert!(dns("unix:/x", &Config::new(), Duration::from_secs(1)).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn re_resolution_adds_and_removes_as_the_answer_changes() {
        use std::sync::{Arc, Mutex};
        let answers = Arc::new(Mutex::new(VecDeque::from([
            Ok(set(&["10.0.0.1:1"])),
            Ok(set(&["10.0.0.1:1", "10.0.0.2:1"])),
            Err(std::io::Error::other("lookup failed")),
            Ok(set(&["10.0.0.2:1"])),
        ])));
        let a2 = answers.clone();
        let mut fed = resolving(Config::new(), Duration::from_secs(30), move || {
            let next = a2.lock().unwrap().pop_front();
            async move { next.unwrap_or_else(|| Ok(set(&["10.0.0.2:1"]))) }
        });
        let mut seen = Vec::new();
        let start = tokio::time::Instant::now();
        while seen.len() < 3 {
            let c =
                std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut fed), cx))
                    .await
                    .unwrap();
            let at = (tokio::time::Instant::now() - start).as_secs();
            seen.push(match c {
                Change::Insert(k, _) => format!("{at}s +{k}"),
                Change::Remove(k) => format!("{at}s -{k}"),
            });
        }
        // The failed lookup at 60 s kept the set; the next one removed .1.
        assert_eq!(
            seen,
            ["0s +10.0.0.1:1", "30s +10.0.0.2:1", "90s -10.0.0.1:1"]
        );
        drop(fed);
        assert!(answers.lock().unwrap().is_empty());
    }
}
