//! `cargo xtask instr --by-layer`: where a call's instructions go.
//!
//! Client and server run on a thread each (the `--apart` layout of
//! `weft-instr`, callgrind `--separate-threads=yes`), so every profile
//! belongs to one side. An instruction belongs to the crate whose source
//! it was compiled from: callgrind keeps the file of code inlined into
//! another function (LTO inlines the handler into the dispatch, the rpc's
//! call future into the caller's loop), so that is asked first; the
//! function's name second (its first crate: `<weft_mux::driver::Driver as
//! Future>::poll` is the mux's, `core::ptr::drop_in_place<weft_rpc::..>`
//! the rpc's). Crates map to layers by side:
//!
//! | crate (source path or name) | client thread | server thread |
//! |---|---|---|
//! | `weft_rpc`, `weft` (facade) | client rpc | server rpc + dispatch |
//! | `weft_mux`, `weft_frame` | client mux | server mux |
//! | `weft_transform` | transform | transform |
//! | the harness (`weft_benches`) | harness (the calling loop) | handler |
//! | `tokio`, `mio` | tokio | tokio |
//!
//! Any other code (std, alloc, core, bytes, ring, memcpy, malloc, the
//! kernel calls' wrappers) is charged to the layer of the function it runs
//! in if that has one (by name, else the layer most of the function's own
//! code comes from), else to the layers that called that function, in
//! proportion to the instructions each caller's calls to it cost, and so
//! on up through callers without a layer; what no layer reaches is
//! "other". So each row is a layer's own code plus the library code it
//! runs, no instruction is counted twice, and the rows add up to the
//! total. (`tokio` includes the socket calls, made through tokio's I/O
//! types, and the scheduler polling the tasks; a layer that awaits another
//! pays nothing for the other's work.)

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::callgrind::Profile;

/// A row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Layer {
    ClientRpc,
    ClientMux,
    Transform,
    ServerMux,
    ServerRpc,
    Handler,
    Tokio,
    Harness,
    Other,
}

impl Layer {
    /// Every layer, in table order.
    pub(crate) const ALL: [Layer; 9] = [
        Layer::ClientRpc,
        Layer::ClientMux,
        Layer::Transform,
        Layer::ServerMux,
        Layer::ServerRpc,
        Layer::Handler,
        Layer::Tokio,
        Layer::Harness,
        Layer::Other,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Layer::ClientRpc => "client rpc (weft_rpc, weft facade)",
            Layer::ClientMux => "client mux (weft_mux, weft_frame)",
            Layer::Transform => "transform (both ends)",
            Layer::ServerMux => "server mux (weft_mux, weft_frame)",
            Layer::ServerRpc => "server rpc + dispatch (weft_rpc, weft facade)",
            Layer::Handler => "handler",
            Layer::Tokio => "tokio (both ends: scheduler, I/O, timers, socket calls)",
            Layer::Harness => "harness (the calling loop)",
            Layer::Other => "other (reached by no layer)",
        }
    }
}

/// Which thread a profile is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Client,
    Server,
}

/// A crate that owns a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Rpc,
    Mux,
    Transform,
    Harness,
    Tokio,
}

impl Owner {
    fn layer(self, side: Side) -> Layer {
        match (self, side) {
            (Owner::Rpc, Side::Client) => Layer::ClientRpc,
            (Owner::Rpc, Side::Server) => Layer::ServerRpc,
            (Owner::Mux, Side::Client) => Layer::ClientMux,
            (Owner::Mux, Side::Server) => Layer::ServerMux,
            (Owner::Transform, _) => Layer::Transform,
            (Owner::Harness, Side::Client) => Layer::Harness,
            (Owner::Harness, Side::Server) => Layer::Handler,
            (Owner::Tokio, _) => Layer::Tokio,
        }
    }
}

/// The owner of a function by the first crate its name shows, if any.
fn by_name(name: &str) -> Option<Owner> {
    const CRATES: [(&str, Owner); 8] = [
        ("weft_rpc::", Owner::Rpc),
        ("weft::", Owner::Rpc),
        ("weft_mux::", Owner::Mux),
        ("weft_frame::", Owner::Mux),
        ("weft_transform::", Owner::Transform),
        ("weft_benches::", Owner::Harness),
        ("tokio::", Owner::Tokio),
        ("mio::", Owner::Tokio),
    ];
    let starts_word = |at: usize| {
        name[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    };
    CRATES
        .iter()
        .flat_map(|(c, owner)| {
            name.match_indices(c)
                .filter(|(at, _)| starts_word(*at))
                .map(move |(at, _)| (at, *owner))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, owner)| owner)
}

/// The owner of a source file, if any: weft's crates by their directory in
/// this workspace, tokio and mio by their registry directory
/// (`tokio-1.54.1/`, not `tokio-util-0.7.20/`).
fn by_file(path: &str) -> Option<Owner> {
    const DIRS: [(&str, Owner); 6] = [
        ("/crates/rpc/src/", Owner::Rpc),
        ("/crates/weft/src/", Owner::Rpc),
        ("/crates/mux/src/", Owner::Mux),
        ("/crates/frame/src/", Owner::Mux),
        ("/crates/transform/src/", Owner::Transform),
        ("/benches/src/", Owner::Harness),
    ];
    if let Some((_, owner)) = DIRS.iter().find(|(d, _)| path.contains(d)) {
        return Some(*owner);
    }
    path.split('/').find_map(|dir| {
        let version = dir
            .strip_prefix("tokio-")
            .or_else(|| dir.strip_prefix("mio-"))?;
        version
            .starts_with(|c: char| c.is_ascii_digit())
            .then_some(Owner::Tokio)
    })
}

/// The layer of a function by its name alone, if any (its own code,
/// whatever was inlined into it, is placed by [`attribute`]).
pub(crate) fn classify(name: &str, side: Side) -> Option<Layer> {
    by_name(name).map(|o| o.layer(side))
}

/// A profile's instructions by layer; the values add up to its total
/// (to rounding).
pub(crate) fn attribute(profile: &Profile, side: Side) -> BTreeMap<Layer, f64> {
    // callers of each function, with the inclusive cost of their calls
    let mut callers: HashMap<&str, Vec<(&str, f64)>> = HashMap::new();
    for ((from, to), cost) in &profile.calls {
        if from != to {
            callers
                .entry(to.as_str())
                .or_default()
                .push((from.as_str(), *cost as f64));
        }
    }
    // each function's shares by layer: one layer for a layered function,
    // its callers' shares weighted by their calls for the others (a fixed
    // point over the unlayered part of the graph; a few rounds suffice as
    // chains of unlayered callers are short, 64 covers any depth seen)
    let mut shares: HashMap<&str, BTreeMap<Layer, f64>> = HashMap::new();
    let mut names: Vec<&str> = profile.own.keys().map(|(f, _)| f.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let owners = owners(profile, side);
    for _ in 0..64 {
        let mut changed = false;
        for &f in &names {
            let new = match owners.get(f) {
                Some(layer) => BTreeMap::from([(*layer, 1.0)]),
                None => blend(callers.get(f).map_or(&[][..], Vec::as_slice), &shares),
            };
            if shares.get(f) != Some(&new) {
                shares.insert(f, new);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut by_layer = BTreeMap::new();
    for ((f, file), own) in &profile.own {
        let own = *own as f64;
        match by_file(file) {
            Some(owner) => *by_layer.entry(owner.layer(side)).or_insert(0.0) += own,
            None => {
                for (layer, share) in &shares[f.as_str()] {
                    *by_layer.entry(*layer).or_insert(0.0) += own * share;
                }
            }
        }
    }
    by_layer
}

/// The layer of each function that has one: by its name, else the layer
/// most of its own instructions come from by source file (a thread's
/// entry closure that is mostly tokio's `block_on` inlined is tokio's).
fn owners(profile: &Profile, side: Side) -> HashMap<&str, Layer> {
    let mut by_file: HashMap<&str, BTreeMap<Layer, u64>> = HashMap::new();
    let mut out = HashMap::new();
    for ((f, file), own) in &profile.own {
        if let Some(layer) = classify(f, side) {
            out.insert(f.as_str(), layer);
        } else if let Some(owner) = self::by_file(file) {
            *by_file
                .entry(f.as_str())
                .or_default()
                .entry(owner.layer(side))
                .or_default() += own;
        }
    }
    for (f, layers) in by_file {
        if let Some((layer, _)) = layers.into_iter().max_by_key(|(_, own)| *own) {
            out.entry(f).or_insert(layer);
        }
    }
    out
}

/// The shares of a function reached through `callers` (Other if none).
fn blend(
    callers: &[(&str, f64)],
    shares: &HashMap<&str, BTreeMap<Layer, f64>>,
) -> BTreeMap<Layer, f64> {
    let weight: f64 = callers.iter().map(|(_, w)| w).sum();
    if weight <= 0.0 {
        return BTreeMap::from([(Layer::Other, 1.0)]);
    }
    let mut out = BTreeMap::new();
    for (caller, w) in callers {
        // a caller not yet resolved counts as Other for this round
        let other = BTreeMap::from([(Layer::Other, 1.0)]);
        for (layer, s) in shares.get(caller).unwrap_or(&other) {
            *out.entry(*layer).or_insert(0.0) += s * w / weight;
        }
    }
    // rounded, so that the fixed point is reached exactly
    out.values_mut().for_each(|v| *v = (*v * 1e9).round() / 1e9);
    out.retain(|_, v| *v > 0.0);
    out
}

/// Per call by layer: the difference of two runs' attributions divided by
/// the difference of their calls.
pub(crate) fn per_call(
    small: &BTreeMap<Layer, f64>,
    large: &BTreeMap<Layer, f64>,
    calls: u64,
) -> BTreeMap<Layer, f64> {
    Layer::ALL
        .into_iter()
        .map(|l| {
            let d = large.get(&l).copied().unwrap_or(0.0) - small.get(&l).copied().unwrap_or(0.0);
            (l, d / calls as f64)
        })
        .collect()
}

/// The markdown table: a row per layer, a column per case, a total row.
pub(crate) fn table(columns: &[(String, BTreeMap<Layer, f64>)], gate: &[Option<u64>]) -> String {
    let mut out = String::from("| layer |");
    for (name, _) in columns {
        let _ = write!(out, " {name} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(columns.len()));
    out.push('\n');
    let cell = |v: f64| format!("{:.0}", v.max(0.0));
    for layer in Layer::ALL {
        let _ = write!(out, "| {} |", layer.label());
        for (_, figures) in columns {
            let _ = write!(
                out,
                " {} |",
                cell(figures.get(&layer).copied().unwrap_or(0.0))
            );
        }
        out.push('\n');
    }
    out.push_str("| **total, two threads** |");
    for (_, figures) in columns {
        let _ = write!(out, " **{}** |", cell(figures.values().sum()));
    }
    out.push_str("\n| the gate's baseline (one thread) |");
    for g in gate {
        let _ = write!(
            out,
            " {} |",
            g.map_or_else(|| "—".to_string(), |g| g.to_string())
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::super::callgrind::{parse, tests::SMALL};
    use super::*;

    #[test]
    fn functions_are_layered_by_the_first_crate_in_their_name() {
        let c = |n| classify(n, Side::Client);
        let s = |n| classify(n, Side::Server);
        assert_eq!(
            c("<weft_mux::driver::Driver as core::future::future::Future>::poll"),
            Some(Layer::ClientMux)
        );
        assert_eq!(
            s("<weft_mux::driver::Driver as core::future::future::Future>::poll"),
            Some(Layer::ServerMux)
        );
        assert_eq!(
            s("core::ptr::drop_in_place<weft_rpc::server::Call>"),
            Some(Layer::ServerRpc)
        );
        assert_eq!(c("weft::net::connect::{{closure}}"), Some(Layer::ClientRpc));
        assert_eq!(
            c("<tokio::io::PollEvented<E> as weft_mux::X>::poll"),
            Some(Layer::Tokio)
        );
        assert_eq!(
            s("weft_benches::e2e::router::{{closure}}"),
            Some(Layer::Handler)
        );
        assert_eq!(c("weft_benches::drive::run_phases"), Some(Layer::Harness));
        assert_eq!(
            c("weft_transform::pipeline::Outbound::seal"),
            Some(Layer::Transform)
        );
        assert_eq!(c("mio::poll::Poll::poll"), Some(Layer::Tokio));
        assert_eq!(c("memcpy"), None);
        assert_eq!(
            c("std::aweft::x"),
            None,
            "a crate name only at a word's start"
        );
    }

    /// A synthetic profile: the rpc calls `memcpy` (150 of memcpy's own
    /// 300), the mux calls it too (100) and a helper that calls it (50);
    /// `memcpy`'s 300 are split by how much each caller's calls cost.
    const LAYERED: &str = "\
events: Ir
summary: 900
fn=weft_rpc::client::Client::unary
0 100
cfn=memcpy
calls=1 0
0 150
cfn=weft_mux::driver::Driver::poll
calls=1 0
0 450
fn=weft_mux::driver::Driver::poll
0 200
cfn=helper
calls=1 0
0 150
cfn=memcpy
calls=1 0
0 100
fn=helper
0 100
cfn=memcpy
calls=1 0
0 50
fn=memcpy
0 300
fn=tokio::runtime::task::raw::poll
0 100
cfn=weft_mux::driver::Driver::poll
calls=1 0
0 0
fn=(below main)
0 100
";

    #[test]
    fn unlayered_code_is_charged_to_its_callers_and_rows_add_up() {
        let p = parse(LAYERED).unwrap();
        let by = attribute(&p, Side::Client);
        let sum: f64 = by.values().sum();
        assert!((sum - 900.0).abs() < 1e-6, "{by:?}");
        // rpc: its own 100 + the memcpy it calls (150)
        assert!((by[&Layer::ClientRpc] - 250.0).abs() < 1e-6, "{by:?}");
        // mux: 200 own + helper 100 + memcpy via mux (100) and via helper (50)
        assert!((by[&Layer::ClientMux] - 450.0).abs() < 1e-6, "{by:?}");
        assert!((by[&Layer::Tokio] - 100.0).abs() < 1e-6, "{by:?}");
        assert!((by[&Layer::Other] - 100.0).abs() < 1e-6, "{by:?}");
        // the same profile on the server side moves the weft rows across
        let server = attribute(&p, Side::Server);
        assert!(
            (server[&Layer::ServerRpc] - 250.0).abs() < 1e-6,
            "{server:?}"
        );
        assert!((server[&Layer::ServerMux] - 450.0).abs() < 1e-6);
    }

    #[test]
    fn inlined_code_goes_to_the_crate_of_its_source_file() {
        assert_eq!(by_file("/w/crates/frame/src/codec.rs"), Some(Owner::Mux));
        assert_eq!(
            by_file("/r/index.crates.io-1949cf8c6b5b557f/tokio-1.54.1/src/io/x.rs"),
            Some(Owner::Tokio)
        );
        assert_eq!(
            by_file("/r/index.crates.io-1/tokio-util-0.7.20/src/codec.rs"),
            None
        );
        assert_eq!(by_file("/rustc/abc/library/core/src/ptr/mod.rs"), None);
        // the dispatch (rpc) with the handler (harness) and a Vec push
        // (core) inlined into it: 60 + 15 rpc, 25 handler
        let p = parse(
            "events: Ir\nsummary: 100\nfl=/w/crates/rpc/src/router.rs\n\
             fn=weft_rpc::router::dispatch\n1 60\nfi=/w/benches/src/e2e.rs\n2 25\n\
             fi=/rustc/x/library/alloc/src/vec/mod.rs\n3 15\n",
        )
        .unwrap();
        let by = attribute(&p, Side::Server);
        assert_eq!(by[&Layer::ServerRpc], 75.0, "{by:?}");
        assert_eq!(by[&Layer::Handler], 25.0, "{by:?}");
    }

    #[test]
    fn per_call_is_the_difference_over_the_calls() {
        let p = parse(SMALL).unwrap();
        let small = attribute(&p, Side::Client);
        let large: BTreeMap<Layer, f64> = small.iter().map(|(l, v)| (*l, v * 3.0)).collect();
        let d = per_call(&small, &large, 2);
        assert!((d[&Layer::Other] - 315.0).abs() < 1e-6, "{d:?}");
        let t = table(&[("sequential".into(), d)], &[Some(14_000)]);
        assert!(t.contains("| **total, two threads** | **315** |"), "{t}");
        assert!(
            t.contains("| the gate's baseline (one thread) | 14000 |"),
            "{t}"
        );
    }
}
