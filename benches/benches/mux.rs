//! Stream ping-pong round trip over TCP loopback, 7 bytes each way, on a
//! current-thread runtime: weft-mux (`stream_round_trip`) beside a raw tokio
//! `LengthDelimitedCodec` ping-pong (`raw_round_trip`), so their ratio is
//! read from one run. Connection set-up and the echo task's start are
//! outside the timed region; each iteration is one `block_on` of one round
//! trip (the same overhead on both sides).

use weft_benches::mux;

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

#[divan::bench]
fn stream_round_trip(bencher: divan::Bencher<'_, '_>) {
    let rt = mux::runtime();
    let mut st = mux::mux_stream(&rt);
    for _ in 0..1000 {
        rt.block_on(mux::mux_round_trip(&mut st)); // warm-up, as the examples do
    }
    bencher.bench_local(|| rt.block_on(mux::mux_round_trip(&mut st)));
}

#[divan::bench]
fn raw_round_trip(bencher: divan::Bencher<'_, '_>) {
    let rt = mux::runtime();
    let mut c = mux::raw_client(&rt);
    for _ in 0..1000 {
        rt.block_on(mux::raw_round_trip(&mut c));
    }
    bencher.bench_local(|| rt.block_on(mux::raw_round_trip(&mut c)));
}
