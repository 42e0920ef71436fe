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

fn unary(bencher: divan::Bencher<'_, '_>, encrypted: bool) {
    let loopback = weft_benches::e2e::Loopback::start(encrypted);
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

/// Eight calls at once on one connection (`tokio::join!`): writes are
/// batched by the connection task and frames queue per stream.
#[divan::bench]
fn unary_concurrent_8(bencher: divan::Bencher<'_, '_>) {
    let loopback = weft_benches::e2e::Loopback::start(false);
    for _ in 0..50 {
        loopback.call_eight();
    }
    bencher.bench_local(|| loopback.call_eight());
}

/// Sixty-four calls at once on one connection (eight joined groups of
/// eight): replies arrive in batches while earlier ones still hold the
/// read buffer.
#[divan::bench]
fn unary_concurrent_64(bencher: divan::Bencher<'_, '_>) {
    let loopback = weft_benches::e2e::Loopback::start(false);
    for _ in 0..10 {
        loopback.call_sixty_four();
    }
    bencher.bench_local(|| loopback.call_sixty_four());
}
