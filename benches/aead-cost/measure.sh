#!/bin/bash
# Instructions per seal and per open of one record (AD 16 bytes) for each
# implementation and size: callgrind's total at 3,000 and at 1,000 records,
# the difference over 2,000 (setup cancels), minus the empty loop's cost
# (the `null` implementation). Deterministic: the same binary gives the
# same figures on a loaded machine.
set -euo pipefail
cd "$(dirname "$0")"
cargo build -q --release --features awslc
bin=${CARGO_TARGET_DIR:-target}/release/aead-cost
out=$(mktemp -d)
ir() { # impl op size count
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$@" > /dev/null 2>&1
    grep -E '^(summary|totals):' "$out/cg" | head -1 | awk '{print $2}'
}
per() { echo $(( ($(ir "$1" "$2" "$3" 3000) - $(ir "$1" "$2" "$3" 1000)) / 2000 )); }
null_seal=$(per null seal 24)
null_both=$(per null both 24)
printf '%-14s %6s %6s %6s\n' impl bytes seal open
for imp in ring-aes awslc-aes rc-aes ring-chacha awslc-chacha rc-chacha; do
    for size in 24 64 256 1536; do
        seal=$(( $(per "$imp" seal "$size") - null_seal ))
        both=$(( $(per "$imp" both "$size") - null_both ))
        printf '%-14s %6d %6d %6d\n' "$imp" "$size" "$seal" "$((both - seal))"
    done
done
rm -rf "$out"
