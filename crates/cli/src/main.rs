//! The `weft` binary (work in progress).

fn main() {
    println!("weft: the CLI lands with the rpc issue");
}
