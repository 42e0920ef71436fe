//! Work in progress: see the crate description in Cargo.toml.
#![forbid(unsafe_code)]
