//! Reading callgrind's output files (written with `--compress-strings=no`
//! and `--compress-pos=no`, so every name is spelled out): the total, each
//! function's own (exclusive) instructions by the source file they come
//! from (code inlined from another file included), and each call edge's
//! inclusive instructions.

use std::collections::HashMap;

/// One profile (one dump of one thread): costs in instructions (`Ir`).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Profile {
    /// The file's `summary:` (or `totals:`) figure.
    pub(crate) total: u64,
    /// (function, source file) → instructions executed in the function
    /// itself from that file's code (the function's own file, or a file
    /// whose code was inlined into it; `???` without debug info).
    pub(crate) own: HashMap<(String, String), u64>,
    /// (caller, callee) → instructions of those calls, callee's callees
    /// included.
    pub(crate) calls: HashMap<(String, String), u64>,
}

/// What the next cost line belongs to.
enum Next {
    /// The current function's own cost.
    Own,
    /// A call's inclusive cost, to the function named.
    Call(String),
}

/// Parses one callgrind output file.
pub(crate) fn parse(text: &str) -> Result<Profile, String> {
    let mut profile = Profile::default();
    let mut total = None;
    let mut positions = 1;
    let mut function = String::new();
    let (mut fn_file, mut file) = (String::new(), String::new());
    let mut callee = String::new();
    let mut next = Next::Own;
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("callgrind line {}: cannot read {line:?}", i + 1);
        if let Some(p) = line.strip_prefix("positions:") {
            positions = p.split_whitespace().count().max(1);
        } else if let Some(e) = line.strip_prefix("events:") {
            if e.split_whitespace().next() != Some("Ir") {
                return Err(format!("callgrind: the first event is not Ir: {line:?}"));
            }
        } else if let Some(v) = line
            .strip_prefix("summary:")
            .or_else(|| line.strip_prefix("totals:"))
        {
            total = Some(v.trim().parse::<u64>().map_err(|_| bad())?);
        } else if let Some(path) = line.strip_prefix("fl=") {
            fn_file = path.trim().to_string();
            file.clone_from(&fn_file);
        } else if let Some(path) = line
            .strip_prefix("fi=")
            .or_else(|| line.strip_prefix("fe="))
        {
            file = path.trim().to_string();
        } else if let Some(name) = line.strip_prefix("fn=") {
            function = name.trim().to_string();
            file.clone_from(&fn_file);
            next = Next::Own;
        } else if let Some(name) = line.strip_prefix("cfn=") {
            callee = name.trim().to_string();
        } else if line.starts_with("calls=") {
            next = Next::Call(callee.clone());
        } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
            // `POSITION... IR`; a missing event column is zero.
            let ir = match line.split_whitespace().nth(positions) {
                Some(v) => v.parse::<u64>().map_err(|_| bad())?,
                None => 0,
            };
            match std::mem::replace(&mut next, Next::Own) {
                Next::Own => {
                    *profile
                        .own
                        .entry((function.clone(), file.clone()))
                        .or_default() += ir;
                }
                Next::Call(to) => {
                    *profile.calls.entry((function.clone(), to)).or_default() += ir;
                }
            }
        }
    }
    profile.total = total.ok_or("callgrind: no summary or totals line")?;
    Ok(profile)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small profile in callgrind's format: `main` calls `a` twice (its
    /// callees included, 300), `a` calls `memcpy` (100); `a` also runs 200
    /// itself (50 of it inlined from b.rs), `memcpy` 100, `main` 15.
    pub(crate) const SMALL: &str = "\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 315

ob=/bin/x
fl=/src/main.rs
fn=main
10 10
+2 5
cfl=/src/a.rs
cfn=a
calls=2 20
12 300

fl=/src/a.rs
fn=a
20 150
fi=/src/b.rs
21 50
fe=/src/a.rs
cfn=memcpy
calls=1 0
22 100

fn=memcpy
0 100
1
";

    #[test]
    fn own_costs_and_call_edges_are_read() {
        let p = parse(SMALL).unwrap();
        assert_eq!(p.total, 315);
        let own = |f: &str, file: &str| p.own[&(f.to_string(), file.to_string())];
        assert_eq!(own("main", "/src/main.rs"), 15);
        assert_eq!(own("a", "/src/a.rs"), 150);
        assert_eq!(own("a", "/src/b.rs"), 50, "inlined from b.rs");
        assert_eq!(own("memcpy", "/src/a.rs"), 100, "fn= keeps the last fl=");
        assert_eq!(p.calls[&("main".into(), "a".into())], 300);
        assert_eq!(p.calls[&("a".into(), "memcpy".into())], 100);
        assert_eq!(p.own.values().sum::<u64>(), p.total);
    }

    #[test]
    fn a_file_without_a_total_or_with_another_event_is_refused() {
        assert!(parse("events: Ir\nfn=a\n1 2\n").is_err());
        assert!(parse("events: Dr Ir\nsummary: 1\n").is_err());
        assert!(parse("events: Ir\nsummary: x\n").is_err());
    }
}
