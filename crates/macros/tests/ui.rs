//! Misuse of `#[weft::service]` fails to compile with an error pointing at
//! the user's code (the expected messages are in `tests/ui/*.stderr`).
//! Few cases on purpose: each one is a rustc run.

#[test]
fn misuse_is_a_compile_error_at_the_users_code() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
