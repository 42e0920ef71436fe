//! Running commands, printed first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workspace root (the parent of xtask/).
pub(crate) fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Runs `program args...` in the workspace root, printing it first; fails
/// with a message naming the command if it exits non-zero.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let status = command(program, args)
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    check(program, args, status)
}

/// Like [`run`], with environment variables set for the command (printed
/// before it, as one would type them).
pub(crate) fn run_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let status = command_env(program, args, env)
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    check(program, args, status)
}

/// Like [`run`], but returns the exit code instead of failing on non-zero
/// (for tools whose codes mean findings, not breakage).
pub(crate) fn status(program: &str, args: &[&str]) -> Result<Option<i32>, String> {
    let status = command(program, args)
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    Ok(status.code())
}

/// Like [`run`], but returns what the command wrote to stdout (stderr still
/// goes to the terminal, so progress stays visible).
pub(crate) fn output(program: &str, args: &[&str]) -> Result<String, String> {
    let out = command(program, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit()) // `output()` would capture it too
        .output()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    check(program, args, out.status)?;
    String::from_utf8(out.stdout).map_err(|_| format!("`{program}` wrote non-UTF-8 output"))
}

/// Like [`output`], but the command sees only the environment `env` (a
/// run that must not depend on the caller's: printed as `env -i K=V ...`).
pub(crate) fn output_in_env(
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<String, String> {
    let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut words = vec!["-i"];
    words.extend(shown.iter().map(String::as_str));
    words.push(program);
    words.extend_from_slice(args);
    println!("$ {}", shell_words("env", &words));
    let out = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    check(program, args, out.status)?;
    String::from_utf8(out.stdout).map_err(|_| format!("`{program}` wrote non-UTF-8 output"))
}

/// Runs a built executable (a bench binary) with `args`, returning stdout.
pub(crate) fn output_of(exe: &Path, args: &[&str]) -> Result<String, String> {
    output(&exe.to_string_lossy(), args)
}

fn command(program: &str, args: &[&str]) -> Command {
    command_env(program, args, &[])
}

fn command_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let assignments: String = env
        .iter()
        .map(|(k, v)| format!("{k}={} ", shell_words(v, &[])))
        .collect();
    println!("$ {assignments}{}", shell_words(program, args));
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root());
    command
}

fn check(program: &str, args: &[&str], status: std::process::ExitStatus) -> Result<(), String> {
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed ({status})",
            shell_words(program, args)
        ))
    }
}

/// The command as one would type it: arguments with spaces are quoted.
fn shell_words(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .map(|word| {
            if word.is_empty() || word.contains([' ', '"', '\'', '$', '*']) {
                format!("'{}'", word.replace('\'', r"'\''"))
            } else {
                word.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether an executable named `program` is on `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Reads a file under the workspace root, naming it in the error.
pub(crate) fn read(relative: &str) -> Result<String, String> {
    let path = root().join(relative);
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {relative}: {e}"))
}

/// Writes a file under the workspace root (creating its directory), saying so.
pub(crate) fn write(relative: &str, contents: &str) -> Result<(), String> {
    let path = root().join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, contents).map_err(|e| format!("cannot write {relative}: {e}"))?;
    println!("wrote {relative}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_env_sets_the_variables_for_the_command_only() {
        let check = r#"test "$WEFT_XTASK_PROBE" = "--cfg loom""#;
        assert!(run_env("sh", &["-c", check], &[("WEFT_XTASK_PROBE", "--cfg loom")]).is_ok());
        assert!(run_env("sh", &["-c", check], &[("WEFT_XTASK_PROBE", "other")]).is_err());
        assert!(std::env::var_os("WEFT_XTASK_PROBE").is_none());
    }

    #[test]
    fn printed_commands_quote_words_with_spaces() {
        assert_eq!(
            shell_words("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            "date -u '+%Y-%m-%d %H:%M UTC'"
        );
        assert_eq!(
            shell_words("cargo", &["test", "--workspace"]),
            "cargo test --workspace"
        );
    }
}
