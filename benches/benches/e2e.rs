//! End to end: one unary call through the `weft` facade over TCP loopback
//! (server and client in this process, one connection, sequential), nil
//! request, `{"n":1}` response, plain and encrypted. See
//! `weft_benches::e2e` for the runtime shape; `cargo xtask bench --peers`
//! compares the same exchange with other stacks.

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

use weft_benches::e2e::Loopback;

fn unary(bencher: divan::Bencher<'_, '_>, encrypted: bool) {
    let loopback = Loopback::start(encrypted);
    for _ in 0..200 {
        loopback.call();
    }
    bencher.bench_local(|| loopback.call());
}

#[divan::bench]
fn unary_plain(bencher: divan::Bencher<'_, '_>) {
    unary(bencher, false);
}

#[divan::bench]
fn unary_encrypted(bencher: divan::Bencher<'_, '_>) {
    unary(bencher, true);
}

/// One call with a deadline: its timer, recycled, and the server's.
#[divan::bench]
fn unary_deadline(bencher: divan::Bencher<'_, '_>) {
    let loopback = Loopback::start(false);
    for _ in 0..200 {
        loopback.call_with_deadline();
    }
    bencher.bench_local(|| loopback.call_with_deadline());
}

/// Calls at once on one connection, `batch` per op, after `warm_up`.
fn joined(bencher: divan::Bencher<'_, '_>, batch: fn(&Loopback), warm_up: usize) {
    let loopback = Loopback::start(false);
    for _ in 0..warm_up {
        batch(&loopback);
    }
    bencher.bench_local(|| batch(&loopback));
}

/// Eight calls at once on one connection (`tokio::join!`): writes are
/// batched by the connection task and frames queue per stream.
#[divan::bench]
fn unary_concurrent_8(bencher: divan::Bencher<'_, '_>) {
    joined(bencher, Loopback::call_eight, 50);
}

/// Sixty-four calls at once on one connection (eight joined groups of
/// eight): replies arrive in batches while earlier ones still hold the
/// read buffer.
#[divan::bench]
fn unary_concurrent_64(bencher: divan::Bencher<'_, '_>) {
    joined(bencher, Loopback::call_sixty_four, 10);
}
