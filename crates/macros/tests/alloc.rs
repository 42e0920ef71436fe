//! A typed call through `#[weft::service]` with the binary codec allocates
//! nothing beyond what the same raw-bytes call does, for a small
//! fixed-size message: the codec writes into the framing arena and reads
//! the message in place, and the generated code only clones an `Arc`.
//! Counted by a global allocator, as in `crates/weft/tests/alloc.rs`: the
//! allocator counts every thread, so the binary has one test, which runs
//! both checks in turn (two tests would run on two threads at once and
//! count each other's allocations).

use std::alloc::System;

use serde::{Deserialize, Serialize};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft::{Bytes, Codec, Config, Context, EncryptionPolicy, Postcard, Router, Status};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CALLS: usize = 2000;

/// A small fixed-size message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// x
    pub x: i32,
    /// y
    pub y: i32,
}

/// The typed service.
#[weft::service(codec = Postcard)]
pub trait Geo {
    /// Mirrors a point.
    async fn flip(&self, ctx: Context, p: Point) -> Result<Point, Status>;
}

struct GeoImpl;

impl Geo for GeoImpl {
    async fn flip(&self, _ctx: Context, p: Point) -> Result<Point, Status> {
        Ok(Point { x: p.y, y: p.x })
    }
}

/// Allocations of `call`, each time, after a warm-up.
async fn counts<F: std::future::Future<Output = ()>>(mut call: impl FnMut() -> F) -> (u64, f64) {
    for _ in 0..200 {
        call().await;
    }
    let mut per_call = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let region = Region::new(GLOBAL);
        call().await;
        let s = region.change();
        per_call.push((s.allocations + s.reallocations) as u64);
    }
    per_call.sort_unstable();
    let mean = per_call.iter().sum::<u64>() as f64 / CALLS as f64;
    (per_call[CALLS / 2], mean)
}

#[test]
fn the_binary_codec_and_a_typed_call_allocate_nothing_per_call() {
    the_binary_codec_allocates_nothing();
    a_typed_call_allocates_no_more_than_the_raw_call();
}

fn the_binary_codec_allocates_nothing() {
    let p = Point { x: 3, y: -4 };
    for _ in 0..10 {
        let _ = <Postcard as Codec<Point>>::encode(&p, 1024).unwrap();
    }
    let region = Region::new(GLOBAL);
    for _ in 0..100 {
        let weft::rpc::codec::Framed::One(b) =
            <Postcard as Codec<Point>>::encode(&p, 1024).unwrap()
        else {
            panic!("a small message is one buffer")
        };
        let back: Point = <Postcard as Codec<Point>>::decode(b.slice(4..)).unwrap();
        assert_eq!(back, p);
    }
    let s = region.change();
    assert_eq!(s.allocations + s.reallocations, 0, "{s:?}");
}

fn a_typed_call_allocates_no_more_than_the_raw_call() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let router = Router::new()
            .add_service(GeoServer::new(GeoImpl))
            .unary("raw/flip", |_c, b: Bytes| async move { Ok(b) });
        let config = Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false);
        let client = GeoClient::new(weft::memory(router, &config).await.unwrap());
        let raw = client.inner().clone();
        let body = Bytes::from_static(&[6, 7]); // the postcard bytes of Point { x: 3, y: -4 }
        let (raw_median, raw_mean) = counts(|| async {
            assert_eq!(raw.unary("raw/flip", body.clone()).await.unwrap().len(), 2);
        })
        .await;
        let p = Point { x: 3, y: -4 };
        let (typed_median, typed_mean) = counts(|| async {
            assert_eq!(client.flip(p).await.unwrap(), Point { x: -4, y: 3 });
        })
        .await;
        println!(
            "allocations per call, client + server: raw median {raw_median} (mean {raw_mean:.3}), \
             typed postcard median {typed_median} (mean {typed_mean:.3})"
        );
        assert_eq!(
            typed_median, raw_median,
            "the typed layer allocates per call"
        );
        assert!(typed_mean <= raw_mean + 0.1, "{typed_mean} vs {raw_mean}");
    });
}
