//! Atomic file writes: a temporary beside the target, `fsync`, rename, directory `fsync`.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tempfile::NamedTempFile;

use crate::error::{Error, Result, io_at};
use crate::temp::{builder, file_name, remove_stale_temps, temp_prefix};
use crate::{Replace, parent, sync_dir};

/// The mode a new file is created with, before the umask: what `File::create` gives (a
/// temporary file's own default, 0600, would make every new output private).
const NEW_FILE_MODE: u32 = 0o666;

/// Writes `bytes` to `path` atomically: [`write_atomic_with`] with a writer of `bytes`.
pub fn write_atomic(path: &Path, bytes: &[u8], replace: Replace) -> Result<()> {
    write_atomic_with(path, replace, |f| f.write_all(bytes))
}

/// Writes the file at `path` atomically: `write` fills a new temporary file beside it
/// (`.<name>.tmp-<pid>-<random>`), which is flushed to disk and renamed onto `path`, and then
/// the directory is flushed. Readers see the old file or the whole new one.
///
/// With [`Replace::Never`] the rename is a no-replace one (`renameat2(RENAME_NOREPLACE)`, a
/// hard link and unlink where the file system lacks it): if anything is at `path` by then,
/// one that appeared while `write` ran included, the write fails with [`Error::Exists`] and
/// that file stays as it is. With [`Replace::Always`] what is at `path` is replaced whole; a
/// replaced file's permissions and, where this process may set it (root, or its owner), its
/// owner are kept. A symbolic link at `path` is replaced, not followed (resolve it first to
/// write through it).
///
/// On any error, a panic in `write` included, the temporary is removed and `path` is left as
/// it was. Temporaries of `path` that killed writers left are removed first
/// ([`remove_stale_temps`]).
pub fn write_atomic_with<F>(path: &Path, replace: Replace, write: F) -> Result<()>
where
    F: FnOnce(&mut File) -> io::Result<()>,
{
    let prefix = temp_prefix(file_name(path)?);
    remove_stale_temps(path);
    let mut tmp = builder(&prefix)
        .permissions(Permissions::from_mode(NEW_FILE_MODE))
        .tempfile_in(parent(path))
        .map_err(io_at(path, "create a temporary file beside it"))?;
    write(tmp.as_file_mut()).map_err(io_at(path, "write its temporary file"))?;
    tmp.as_file()
        .sync_all()
        .map_err(io_at(path, "sync its temporary file"))?;
    persist(tmp, path, replace, true)
}

/// Renames the temporary `tmp` onto `path` as `replace` says (giving it the replaced file's
/// permissions and owner with `keep`), then flushes the directory.
fn persist<F>(tmp: NamedTempFile<F>, path: &Path, replace: Replace, keep: bool) -> Result<()> {
    let result = match replace {
        Replace::Always => {
            if keep {
                keep_metadata(tmp.path(), path).map_err(io_at(
                    path,
                    "give its temporary file the old file's permissions",
                ))?;
            }
            tmp.persist(path).map(drop)
        }
        Replace::Never => tmp.persist_noclobber(path).map(drop),
    };
    // The error gives the temporary back; dropping it removes it.
    result.map_err(|e| match e.error.kind() {
        io::ErrorKind::AlreadyExists if replace == Replace::Never => Error::Exists {
            path: path.to_path_buf(),
        },
        _ => Error::io(path, "rename its temporary file into place", e.error),
    })?;
    sync_dir(parent(path));
    Ok(())
}

/// Gives the temporary file `tmp` the permissions and, where this process may (root, or the
/// same owner), the owner of the file `replaced` it will replace, if there is one.
fn keep_metadata(tmp: &Path, replaced: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(old) = std::fs::metadata(replaced) else {
        return Ok(());
    };
    if !old.is_file() {
        return Ok(());
    }
    std::fs::set_permissions(tmp, old.permissions())?;
    // Best effort: only root can give a file away.
    let _ = std::os::unix::fs::chown(tmp, Some(old.uid()), Some(old.gid()));
    Ok(())
}

/// Makes the existing file `source` (in the same file system) appear at `path` as
/// [`write_atomic_with`] would: a hard link under a temporary name beside `path`, renamed into
/// place as `replace` says. The file is not copied, so a large one is not on disk twice; it
/// keeps its own permissions (they are the source's: the same file). Where the file system
/// refuses hard links, the bytes are copied through [`write_atomic_with`] instead.
pub fn publish_link(source: &Path, path: &Path, replace: Replace) -> Result<()> {
    let prefix = temp_prefix(file_name(path)?);
    remove_stale_temps(path);
    let linked = builder(&prefix).make_in(parent(path), |tmp| std::fs::hard_link(source, tmp));
    match linked {
        // The link is the source itself: its permissions are not the replaced file's to set.
        Ok(tmp) => persist(tmp, path, replace, false),
        Err(_) => {
            let mut from = File::open(source).map_err(io_at(source, "open"))?;
            write_atomic_with(path, replace, |f| io::copy(&mut from, f).map(drop))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn temps(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    }

    /// The old writers checked the target at their start only: a file that appeared while
    /// they wrote was replaced at their end.
    #[test]
    fn no_replace_refuses_a_target_that_appeared_during_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.swb");
        let err = write_atomic_with(&path, Replace::Never, |f| {
            // Another process's output, made while this one was writing.
            std::fs::write(&path, b"theirs").unwrap();
            f.write_all(b"ours")
        })
        .unwrap_err();
        assert!(err.is_exists(), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "{} already exists; pass --force to replace it",
                path.display()
            )
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        assert!(temps(dir.path()).is_empty(), "{:?}", temps(dir.path()));
        // A missing target is written.
        let fresh = dir.path().join("fresh.swb");
        write_atomic(&fresh, b"ours", Replace::Never).unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"ours");
    }

    #[test]
    fn force_replaces_whole_and_keeps_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"old contents, longer").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
        write_atomic_with(&path, Replace::Always, |f| {
            std::fs::write(&path, b"theirs").unwrap();
            f.write_all(b"new")
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        // The mode of the file found at the end (theirs, made with 0640 kept by `write`).
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o640);
        std::fs::set_permissions(&path, Permissions::from_mode(0o604)).unwrap();
        write_atomic(&path, b"newer", Replace::Always).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o604);
        assert!(temps(dir.path()).is_empty());
    }

    /// A new file gets the usual mode (0666 less the umask), not a temporary file's 0600.
    #[test]
    fn a_new_file_is_not_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.txt");
        let reference = dir.path().join("reference.txt");
        File::create(&reference).unwrap();
        write_atomic(&path, b"x", Replace::Never).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&path), mode(&reference));
    }

    /// A writer that fails or panics half-way (a crash of the output's code) leaves the
    /// original whole and no temporary.
    #[test]
    fn a_failed_or_panicking_writer_leaves_the_original() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.bpk");
        std::fs::write(&path, b"original").unwrap();
        for replace in [Replace::Never, Replace::Always] {
            let err = write_atomic_with(&path, replace, |f| {
                f.write_all(b"half")?;
                Err(io::Error::other("No space left on device"))
            })
            .unwrap_err();
            assert!(err.to_string().contains("No space left"), "{err}");
            assert!(err.to_string().contains("model.bpk"), "{err}");
            let panicked = std::panic::catch_unwind(|| {
                let _ = write_atomic_with(&path, replace, |f| {
                    f.write_all(b"half").unwrap();
                    panic!("killed");
                });
            });
            assert!(panicked.is_err());
            assert_eq!(std::fs::read(&path).unwrap(), b"original");
            assert!(temps(dir.path()).is_empty(), "{:?}", temps(dir.path()));
        }
    }

    #[test]
    fn errors_name_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("f");
        let err = write_atomic(&missing, b"x", Replace::Always).unwrap_err();
        assert!(err.to_string().contains("no-such-dir/f"), "{err}");
        let err = write_atomic(Path::new("/"), b"x", Replace::Always).unwrap_err();
        assert!(matches!(err, Error::NoFileName { .. }), "{err}");
        // The target is a non-empty directory: the rename fails, no temporary stays.
        let occupied = dir.path().join("occupied");
        std::fs::create_dir(&occupied).unwrap();
        std::fs::write(occupied.join("x"), b"x").unwrap();
        let err = write_atomic(&occupied, b"x", Replace::Always).unwrap_err();
        assert!(err.to_string().contains("occupied"), "{err}");
        assert!(temps(dir.path()).is_empty());
    }

    #[test]
    fn a_stale_temporary_of_a_dead_process_is_removed_a_live_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        // 4000000 is above Linux's largest PID (2^22): never a live process.
        let dead = dir.path().join(".f.svg.tmp-4000000-abc123");
        let dead_old = dir.path().join(".f.svg.tmp-4000000");
        let dead_dir = dir.path().join(".f.svg.tmp-4000001-xyz");
        let mine = dir
            .path()
            .join(format!(".f.svg.tmp-{}-abc123", std::process::id()));
        let init = dir.path().join(".f.svg.tmp-1-abc123");
        let other_file = dir.path().join(".g.svg.tmp-4000000-abc123");
        let not_ours = dir.path().join(".f.svg.tmp-4000000.bak");
        for p in [&dead, &dead_old, &mine, &init, &other_file, &not_ours] {
            std::fs::write(p, b"<sv").unwrap();
        }
        std::fs::create_dir(&dead_dir).unwrap();
        std::fs::write(dead_dir.join("inside"), b"x").unwrap();
        write_atomic(&path, b"<svg/>", Replace::Never).unwrap();
        assert!(!dead.exists() && !dead_old.exists() && !dead_dir.exists());
        assert!(mine.exists(), "this live process's temporary was removed");
        assert!(init.exists(), "PID 1's temporary was removed");
        assert!(other_file.exists(), "another file's temporary was removed");
        assert!(not_ours.exists(), "a name outside the scheme was removed");
        assert_eq!(std::fs::read(&path).unwrap(), b"<svg/>");
    }

    #[test]
    fn a_link_is_published_without_a_copy_and_without_replacing() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("src.bpk");
        let path = dir.path().join("model.bpk");
        std::fs::write(&source, b"model").unwrap();
        publish_link(&source, &path, Replace::Never).unwrap();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(ino(&source), ino(&path));
        let err = publish_link(&source, &path, Replace::Never).unwrap_err();
        assert!(err.is_exists(), "{err}");
        std::fs::write(dir.path().join("other"), b"other").unwrap();
        publish_link(&dir.path().join("other"), &path, Replace::Always).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"other");
        assert!(temps(dir.path()).is_empty());
    }
}
