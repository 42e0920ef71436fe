//! The README's `Cargo.toml` snippet, checked as it stands: every weft
//! feature it names exists, and its tokio features cover what the quick
//! start beside it uses. (The quick start itself runs as a doc test of the
//! crate root.)

const README: &str = include_str!("../../../README.md");
const MANIFEST: &str = include_str!("../Cargo.toml");

/// The first ```toml block of the README.
fn snippet() -> &'static str {
    let start = README.find("```toml\n").expect("README has a toml block") + "```toml\n".len();
    let len = README[start..].find("```").expect("the toml block ends");
    &README[start..start + len]
}

/// The quoted words inside `features = [...]` on the line that starts with `dep =`.
fn features_of(block: &str, dep: &str) -> Vec<String> {
    let line = block
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dep} =")))
        .unwrap_or_else(|| panic!("the snippet names no {dep} dependency:\n{block}"));
    let Some(list) = line.split("features = [").nth(1) else {
        return Vec::new();
    };
    let list = &list[..list.find(']').expect("the feature list closes")];
    list.split(',')
        .map(|f| f.trim().trim_matches('"').to_string())
        .filter(|f| !f.is_empty())
        .collect()
}

/// The names declared in weft's `[features]` table.
fn declared_features() -> Vec<String> {
    let table = MANIFEST
        .split("[features]")
        .nth(1)
        .expect("weft declares features");
    table
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim().to_string()))
        .collect()
}

#[test]
fn the_snippets_weft_features_all_exist() {
    let named = features_of(snippet(), "weft");
    let declared = declared_features();
    assert!(
        !named.is_empty(),
        "the README's text names tower and postcard: the snippet should too"
    );
    for f in &named {
        assert!(
            declared.contains(f),
            "README names weft feature {f:?}; weft declares {declared:?}"
        );
    }
    // The text beside the snippet names the optional features; the snippet carries them.
    for f in ["tower", "postcard"] {
        assert!(named.iter().any(|n| n == f), "snippet lacks {f:?}");
    }
}

#[test]
fn the_snippets_tokio_features_cover_the_quick_start() {
    let tokio = features_of(snippet(), "tokio");
    let quick_start = &README[README.find("```rust").expect("a quick start")..];
    if quick_start.contains("#[tokio::main]") {
        for needed in ["macros", "rt-multi-thread"] {
            assert!(
                tokio.iter().any(|f| f == needed),
                "#[tokio::main] needs tokio feature {needed:?}"
            );
        }
    }
}
