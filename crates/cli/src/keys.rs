//! Key files: `weft keygen`, reading a private key file, and the server's
//! allow-list file, reloaded when its contents change (and failing closed
//! when it cannot be read).

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use weft::transform::{AllowList, KeyHex, StaticKey, parse_key_hex, parse_public_key_hex};
use zeroize::Zeroizing;

/// How often `weft serve` re-reads the allow-list file.
pub(crate) const ALLOW_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// Writes a new key pair: the private key (64 hex digits) to `path`,
/// created with mode 0600 and never over an existing file; returns the
/// public key as hex.
pub(crate) fn keygen(path: &Path) -> Result<String, String> {
    let key = StaticKey::generate().map_err(|e| e.to_string())?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let text = key.private_hex();
    file.write_all(text.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(KeyHex(&key.public_key()).to_string())
}

/// A file the server trusts, and what others may therefore not do to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trusted {
    /// A private key: others may neither read nor write it.
    PrivateKey,
    /// The allow-list: others may read it, but not write it (whoever can
    /// write it decides who connects).
    AllowList,
}

impl Trusted {
    fn name(self) -> &'static str {
        match self {
            Trusted::PrivateKey => "key file",
            Trusted::AllowList => "allow-list",
        }
    }
}

/// Refuses a trusted file that someone other than this server's user (or
/// root) owns, or that group or others may write (or, for a private key,
/// read): OpenSSH's StrictModes for `authorized_keys` and identity files.
/// The mode and owner are those of the file a symbolic link points to.
fn check_trusted(path: &Path, what: Trusted) -> Result<(), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("{} {}: {e}", what.name(), path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    let problem = match what {
        Trusted::PrivateKey if mode & 0o077 != 0 => Some(format!(
            "is readable by others (mode {mode:03o}): chmod 600 it"
        )),
        Trusted::AllowList if mode & 0o022 != 0 => Some(format!(
            "is writable by others (mode {mode:03o}): chmod go-w it"
        )),
        _ => None,
    };
    if let Some(problem) = problem {
        return Err(format!("{} {} {problem}", what.name(), path.display()));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{} {} is owned by uid {}, not by this server's user (uid {me}) or root: chown it",
            what.name(),
            path.display(),
            meta.uid()
        ));
    }
    Ok(())
}

/// Reads a private key file written by `weft keygen`. Refuses a file that
/// others can read or that another user owns, as ssh does. Every copy of
/// the key's text and bytes made here is zeroed.
pub(crate) fn read_private_key(path: &Path) -> Result<StaticKey, String> {
    check_trusted(path, Trusted::PrivateKey)?;
    let text = Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("key file {}: {e}", path.display()))?,
    );
    let private = Zeroizing::new(
        parse_key_hex(&text).map_err(|e| format!("key file {}: {e}", path.display()))?,
    );
    Ok(StaticKey::from_private(*private))
}

/// Parses a public key given on the command line (canonical encoding).
pub(crate) fn parse_public_key(text: &str) -> Result<[u8; 32], String> {
    parse_public_key_hex(text).map_err(|e| format!("public key: {e}"))
}

/// The allow-list file's bytes, once the file passes [`check_trusted`].
fn read_allow(path: &Path) -> Result<Vec<u8>, String> {
    check_trusted(path, Trusted::AllowList)?;
    std::fs::read(path).map_err(|e| format!("allow-list {}: {e}", path.display()))
}

fn parse_allow(path: &Path, bytes: &[u8]) -> Result<Vec<[u8; 32]>, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("allow-list {}: not UTF-8 text", path.display()))?;
    AllowList::parse_keys(text).map_err(|e| format!("allow-list {}: {e}", path.display()))
}

/// What the watcher last made of the allow-list file.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Contents with this SHA-256, parsed and in force.
    Loaded([u8; 32]),
    /// Refused for this reason: nobody is admitted until the file is fixed.
    Refused(String),
}

/// SHA-256 of the file's contents: a change is found whatever happens to
/// its modification time (tools that keep it, coarse file-system clocks).
fn digest(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// One look at the file: applies a change to `list`, fails closed on any
/// problem (an empty list: existing connections keep running, no new
/// handshake passes), and logs each change of state once.
fn refresh(path: &Path, list: &AllowList, seen: &mut Seen) {
    let next = read_allow(path).and_then(|bytes| {
        let d = digest(&bytes);
        if *seen == Seen::Loaded(d) {
            return Ok(None);
        }
        parse_allow(path, &bytes).map(|keys| Some((d, keys)))
    });
    match next {
        Ok(None) => {}
        Ok(Some((d, keys))) => {
            list.replace(keys);
            tracing::info!(
                target: "weft::allow",
                path = %path.display(),
                keys = list.len(),
                "allow-list reloaded"
            );
            *seen = Seen::Loaded(d);
        }
        Err(e) => {
            // Always empty it, even when the error is the one seen last:
            // nothing but a good file may put keys back.
            list.deny_all();
            let now = Seen::Refused(e);
            if *seen != now {
                if let Seen::Refused(e) = &now {
                    tracing::error!(
                        target: "weft::allow",
                        "{e}; NO CLIENT IS ADMITTED until the file is fixed \
                         (open connections keep running)"
                    );
                }
                *seen = now;
            }
        }
    }
}

/// Loads the allow-list file and keeps it current: a task re-reads it every
/// [`ALLOW_RELOAD_INTERVAL`] and applies any change of its contents. A file
/// that is refused at start stops the server from starting; one that later
/// fails to parse, disappears or becomes writable by others empties the
/// list (fail closed), logged at error level.
pub(crate) fn watched_allow_list(path: PathBuf) -> Result<AllowList, String> {
    watch_allow_list(path, ALLOW_RELOAD_INTERVAL)
}

fn watch_allow_list(path: PathBuf, every: Duration) -> Result<AllowList, String> {
    let bytes = read_allow(&path)?;
    let list = AllowList::new(parse_allow(&path, &bytes)?);
    let mut seen = Seen::Loaded(digest(&bytes));
    let handle = list.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            refresh(&path, &handle, &mut seen);
        }
    });
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-keys-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    /// Writes `text` to `path` with mode 0644 (an allow-list's usual mode).
    fn write_list(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, Permissions::from_mode(0o644)).unwrap();
    }

    fn key(n: u8) -> [u8; 32] {
        StaticKey::from_private([n; 32]).public_key()
    }

    #[test]
    fn keygen_writes_a_0600_file_that_reads_back() {
        let path = temp("keygen");
        let public = keygen(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let key = read_private_key(&path).unwrap();
        assert_eq!(KeyHex(&key.public_key()).to_string(), public);
        // Never over an existing file.
        assert!(keygen(&path).unwrap_err().contains("cannot create"));
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let e = read_private_key(&path).unwrap_err();
        assert!(e.contains("readable by others"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn trusted_files_owned_by_another_user_are_refused() {
        let (key_file, list) = (temp("owner-key"), temp("owner-list"));
        keygen(&key_file).unwrap();
        write_list(&list, "");
        assert!(read_private_key(&key_file).is_ok());
        assert!(read_allow(&list).is_ok());
        // Giving a file away needs root; CI and these machines run as root.
        if std::os::unix::fs::chown(&key_file, Some(4242), None).is_ok() {
            std::os::unix::fs::chown(&list, Some(4242), None).unwrap();
            for e in [
                read_private_key(&key_file).unwrap_err(),
                read_allow(&list).unwrap_err(),
            ] {
                assert!(e.contains("is owned by uid 4242"), "{e}");
            }
        }
        std::fs::remove_file(&key_file).unwrap();
        std::fs::remove_file(&list).unwrap();
    }

    #[test]
    fn an_allow_list_others_can_write_is_refused_at_start() {
        let path = temp("writable");
        for mode in [0o664, 0o646] {
            write_list(&path, &format!("{}\n", KeyHex(&key(1))));
            std::fs::set_permissions(&path, Permissions::from_mode(mode)).unwrap();
            let e = read_allow(&path).unwrap_err();
            assert!(e.contains("is writable by others"), "{mode:o}: {e}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    /// Lets the watcher (on the paused clock) look at the file a few times.
    async fn ticks() {
        for _ in 0..4 {
            tokio::time::sleep(ALLOW_RELOAD_INTERVAL).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_allow_list_is_reloaded_when_its_contents_change_whatever_the_mtime() {
        let path = temp("allow");
        let (a, b) = (key(1), key(2));
        write_list(&path, &format!("{} alice\n", KeyHex(&a)));
        let list = watched_allow_list(path.clone()).unwrap();
        assert!(list.contains(&a) && !list.contains(&b));
        let first = std::fs::metadata(&path).unwrap().modified().unwrap();
        write_list(&path, &format!("# bob only\n{}\n", KeyHex(&b)));
        // The same modification time as before: only the contents changed.
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(first).unwrap();
        ticks().await;
        assert!(list.contains(&b) && !list.contains(&a), "reloaded");
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_missing_or_writable_allow_list_admits_nobody() {
        let path = temp("fail-closed");
        let (a, b) = (key(1), key(2));
        let good = format!("{} alice\n{} bob\n", KeyHex(&a), KeyHex(&b));
        write_list(&path, &good);
        let list = watched_allow_list(path.clone()).unwrap();
        assert_eq!(list.len(), 2);
        // Revoking bob with a typo left behind: nobody, not the old list.
        write_list(&path, &format!("{} alice\nnot a key\n", KeyHex(&a)));
        ticks().await;
        assert!(list.is_empty(), "parse error keeps {} keys", list.len());
        write_list(&path, &good);
        ticks().await;
        assert_eq!(list.len(), 2, "a good file puts the keys back");
        std::fs::remove_file(&path).unwrap();
        ticks().await;
        assert!(list.is_empty(), "a deleted file keeps {} keys", list.len());
        write_list(&path, &good);
        ticks().await;
        assert_eq!(list.len(), 2);
        std::fs::set_permissions(&path, Permissions::from_mode(0o666)).unwrap();
        ticks().await;
        assert!(list.is_empty(), "a world-writable file keeps its keys");
        std::fs::remove_file(&path).unwrap();
    }

    /// Finding: an allow-list reload kept the previous, more permissive list
    /// when the file broke. Against a real server over TCP: a broken or
    /// deleted file admits nobody, connections already open keep working.
    #[tokio::test]
    async fn hostile_a_broken_or_deleted_allow_list_admits_nobody_over_tcp() {
        use weft::{Config, EncryptionPolicy, Listener, Router};
        let path = temp("e2e");
        let (server_key, alice) = (
            StaticKey::generate().unwrap(),
            StaticKey::generate().unwrap(),
        );
        let good = format!("{} alice\n", KeyHex(&alice.public_key()));
        write_list(&path, &good);
        let every = Duration::from_millis(20);
        let list = watch_allow_list(path.clone(), every).unwrap();
        let server_config = Config::new()
            .encryption(EncryptionPolicy::Required)
            .identity(server_key.clone())
            .allow(list);
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().unary("ping", |_ctx, req| async move { Ok(req) });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(weft::serve(listener, router, server_config, async {
            let _ = stopped.await;
        }));
        let client = Config::new()
            .identity(alice)
            .server_key(server_key.public_key());
        let open = weft::connect(&addr, &client).await.unwrap();
        // Waits until a connect attempt gives `admitted`, or fails the test.
        let until = |admitted: bool| {
            let (addr, client) = (addr.clone(), client.clone());
            async move {
                for _ in 0..250 {
                    let got = weft::connect(&addr, &client).await;
                    if got.is_ok() == admitted {
                        return got.err();
                    }
                    tokio::time::sleep(every).await;
                }
                panic!("never {}", if admitted { "admitted" } else { "refused" });
            }
        };
        write_list(&path, &format!("{good}garbage line\n"));
        let e = until(false).await.unwrap();
        assert!(e.to_string().contains("is not on its allow-list"), "{e}");
        let ping = weft::Bytes::from_static(b"still served");
        assert_eq!(open.unary("ping", ping.clone()).await.unwrap(), ping);
        write_list(&path, &good);
        until(true).await;
        std::fs::remove_file(&path).unwrap();
        until(false).await;
        assert_eq!(open.unary("ping", ping.clone()).await.unwrap(), ping);
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
