//! A short soak in each security mode: every call checked, none lost or
//! duplicated, the server's stream tables empty at the end. (`cargo xtask
//! soak --secs N` runs the same function for longer.)

use std::time::Duration;

use weft_testkit::{Mode, soak};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_briefly_in_each_mode_loses_and_duplicates_nothing() {
    for mode in [Mode::plain(), Mode::noise_nn(), Mode::psk()] {
        let r = soak(Duration::from_millis(700), 3, &mode).await;
        println!("{}: {r:?}", mode.name);
        assert!(r.is_clean(), "{}: {r:?}", mode.name);
        assert!(r.calls >= 8, "{}: {r:?}", mode.name);
    }
}
