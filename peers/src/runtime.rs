//! The one tokio runtime shape every async peer (and weft's entry) uses, so
//! the comparison is of stacks, not of runtime settings.

/// A multi-thread runtime with one worker per core (tokio's default, what
/// `#[tokio::main]` gives), I/O and timers enabled. Client and server share it.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built")
}
