//! Builds that `cargo xtask ci` starts early, at the lowest CPU priority,
//! for a later step: the soak's release build and the fuzz targets' nightly
//! build. At `nice 19` they take only the CPU the steps in front leave idle
//! (a test binary waiting on a socket, a crate chain compiling one crate at
//! a time, the fuzz step's last wave with one target on two cores), so the
//! step that needs them later finds its build done or nearly.
//!
//! Nothing may edit the sources while one runs: `cargo xtask ci` waits for
//! them before the mutants step (which mutates in place on CI) and starts
//! them again after it.
//!
//! A prebuild never decides anything: the step still runs its own cargo
//! command, which finds everything fresh (same package, profile and
//! features) or, if the prebuild failed, builds and reports the error
//! itself in the main log.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crate::cmd;

/// How a prebuild ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The command succeeded: the step finds its build fresh.
    Built,
    /// It failed: the step's own build shows why.
    Failed,
    /// It never started (no `nice`?): the step builds for itself.
    NotStarted,
}

/// A build running in the background, killed if never waited for (a
/// failed step ends CI early).
#[derive(Debug)]
pub(crate) struct Prebuild {
    name: &'static str,
    log: PathBuf,
    started: Instant,
    child: Option<Child>,
}

impl Prebuild {
    /// Starts `cargo args...` under `nice -n 19` in the workspace root,
    /// its output in target/ci-logs/NAME.log. If it cannot start, says so
    /// and carries on (the step builds for itself).
    pub(crate) fn start(name: &'static str, args: &[&str]) -> Prebuild {
        let logs = cmd::root().join("target").join("ci-logs");
        let log = logs.join(format!("{name}.log"));
        let child = std::fs::create_dir_all(&logs)
            .and_then(|()| File::create(&log))
            .and_then(|out| {
                let err = out.try_clone()?;
                let mut command = Command::new("nice");
                command
                    .args(["-n", "19", "cargo"])
                    .args(args)
                    .current_dir(cmd::root())
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err);
                // Its own process group, so that dropping it stops cargo's
                // rustc children too.
                #[cfg(unix)]
                std::os::unix::process::CommandExt::process_group(&mut command, 0);
                command.spawn()
            });
        let child = match child {
            Ok(child) => {
                println!(
                    "$ nice -n 19 cargo {}  &  (prebuild {name}, log: {})",
                    args.join(" "),
                    log.display()
                );
                Some(child)
            }
            Err(e) => {
                println!("prebuild {name}: not started ({e}); its step builds for itself");
                None
            }
        };
        Prebuild {
            name,
            log,
            started: Instant::now(),
            child,
        }
    }

    /// Waits for the build, saying how it ended and how long it had run.
    /// Never an error: a failed prebuild is rebuilt, and its error shown,
    /// by the step's own command.
    pub(crate) fn finish(mut self) -> Ended {
        let Some(mut child) = self.child.take() else {
            return Ended::NotStarted;
        };
        let waited = Instant::now();
        let status = child.wait();
        let (total, wait) = (self.started.elapsed(), waited.elapsed());
        match status {
            Ok(s) if s.success() => {
                println!(
                    "prebuild {}: done, {:.0} s after its start ({:.0} s waited for here)",
                    self.name,
                    total.as_secs_f64(),
                    wait.as_secs_f64()
                );
                Ended::Built
            }
            Ok(s) => {
                println!(
                    "prebuild {}: {s} (log: {}); the step builds for itself",
                    self.name,
                    self.log.display()
                );
                Ended::Failed
            }
            Err(e) => {
                println!("prebuild {}: {e}; the step builds for itself", self.name);
                Ended::Failed
            }
        }
    }
}

impl Drop for Prebuild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let group = format!("-{}", child.id());
            let killed = Command::new("kill")
                .args(["-KILL", "--", &group])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !killed {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prebuild_reports_how_its_command_ended() {
        assert_eq!(
            Prebuild::start("xtask-test-ok", &["--version"]).finish(),
            Ended::Built
        );
        assert_eq!(
            Prebuild::start("xtask-test-bad", &["no-such-subcommand-of-cargo"]).finish(),
            Ended::Failed
        );
        let log = cmd::root().join("target/ci-logs/xtask-test-ok.log");
        let text = std::fs::read_to_string(log).unwrap();
        assert!(text.starts_with("cargo "), "{text:?}");
    }
}
