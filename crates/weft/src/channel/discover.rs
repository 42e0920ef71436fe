//! Discovery sources: a fixed list, and DNS resolved again on a period.
//! Any `Stream` of [`Change`]s is a source too.

use std::collections::{BTreeSet, VecDeque};
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
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let config = config.clone();
    tokio::spawn(async move {
        let mut known = BTreeSet::new();
        loop {
            match tokio::net::lookup_host(&target).await {
                Ok(addrs) => {
                    let now: BTreeSet<String> = addrs.map(|a| a.to_string()).collect();
                    for change in diff(&known, &now, &config) {
                        if tx.send(change).await.is_err() {
                            return; // the channel is gone
                        }
                    }
                    known = now;
                }
                Err(e) => tracing::debug!(%target, error = %e, "DNS lookup failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = tx.closed() => return,
            }
        }
    });
    Ok(Fed { rx })
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
}
