//! The soak of `weft_benches::soak`, briefly: the same checks as CI's 60 s
//! run (`cargo xtask soak --secs 60`), over every security mode and
//! compression, every call shape, cancellations, deadlines and refused
//! streams.

use std::time::Duration;

use weft_benches::soak::{Options, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_loses_duplicates_and_leaks_nothing() {
    let report = run(&Options::new(Duration::from_secs(2)))
        .await
        .unwrap_or_else(|e| panic!("soak failed: {e}"));
    println!("{report}");
    assert!(report.completed >= 50, "{report}");
}
