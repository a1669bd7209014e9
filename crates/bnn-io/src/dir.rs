//! Atomic directory writes: a directory filled under a temporary name beside its target, then
//! moved into place.

use std::fs::Permissions;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, RenameFlags, renameat_with};
use rustix::io::Errno;

use crate::error::{Error, io_at};
use crate::temp::{builder, file_name, remove_stale_temps, temp_prefix};
use crate::{Replace, parent, sync_dir};

/// The mode a new directory is created with, before the umask: what `create_dir` gives (a
/// temporary directory's own default, 0700, would make every new output private).
const NEW_DIR_MODE: u32 = 0o777;

/// Tries of a [`Replace::Always`] move whose target keeps appearing and vanishing between the
/// exchange and the no-replace rename (other writers of the same target): each try is one of
/// the two; eight are far more than two writers racing need.
const MAX_MOVE_TRIES: usize = 8;

/// Makes `path` the directory that `fill` fills, whole or not at all: `fill` gets a new
/// temporary directory beside `path` (`.<name>.tmp-<pid>-<random>`, in the same parent so that
/// the rename stays on one file system), which is flushed and moved onto `path`, and then the
/// parent is flushed. The files `fill` writes it must flush itself (or write them with
/// [`write_atomic`](crate::write_atomic)).
///
/// With [`Replace::Never`], anything at `path` by the time `fill` is done, one that appeared
/// meanwhile included, makes the call fail with [`Error::Exists`], except an empty directory,
/// which is taken (a directory made for the output). With [`Replace::Always`] an existing
/// directory is exchanged with the new one in one step (`renameat2(RENAME_EXCHANGE)`; renamed
/// aside first where the file system lacks it), and removed only once the new one is in place;
/// it keeps its permissions.
///
/// On any error, `fill`'s included, the temporary directory is removed and `path` is left as
/// it was. Temporaries of `path` that killed writers left are removed first.
pub fn write_dir_atomic<E, F>(path: &Path, replace: Replace, fill: F) -> Result<(), E>
where
    E: From<Error>,
    F: FnOnce(&Path) -> Result<(), E>,
{
    let prefix = temp_prefix(file_name(path)?);
    remove_stale_temps(path);
    let dir = parent(path);
    let tmp = builder(&prefix)
        .permissions(Permissions::from_mode(NEW_DIR_MODE))
        .tempdir_in(dir)
        .map_err(io_at(path, "create a temporary directory beside it"))?;
    // Dropping `tmp` on an error (or a panic) removes it with what `fill` wrote.
    fill(tmp.path())?;
    sync_dir(tmp.path());
    if replace == Replace::Always
        && let Ok(old) = std::fs::metadata(path)
        && old.is_dir()
    {
        std::fs::set_permissions(tmp.path(), old.permissions()).map_err(io_at(
            path,
            "give its temporary directory the old one's permissions",
        ))?;
    }
    let tmp = tmp.keep();
    let moved = match replace {
        Replace::Never => move_new(&tmp, path),
        Replace::Always => move_over(&tmp, path),
    };
    // Best effort: after an exchange the old directory is there; after an error, the new one.
    remove_any(&tmp);
    moved?;
    sync_dir(dir);
    Ok(())
}

/// A new, empty temporary directory beside `path` (`.<name>.tmp-<pid>-<random>`, in the same
/// file system), removed with what it holds when dropped: a staging area whose entries
/// [`rename_into_place`] then moves. Temporaries of `path` that killed writers left are
/// removed first.
pub fn temp_dir_beside(path: &Path) -> Result<tempfile::TempDir, Error> {
    let prefix = temp_prefix(file_name(path)?);
    remove_stale_temps(path);
    builder(&prefix)
        .permissions(Permissions::from_mode(NEW_DIR_MODE))
        .tempdir_in(parent(path))
        .map_err(io_at(path, "create a temporary directory beside it"))
}

/// Moves the file or directory `from` onto `to` (the same file system) in one step, then
/// flushes `to`'s directory. With [`Replace::Never`] anything at `to` makes it fail with
/// [`Error::Exists`] (a no-replace rename); with [`Replace::Always`] what is at `to` is
/// exchanged with `from` and then removed, once the new one is in place.
pub fn rename_into_place(from: &Path, to: &Path, replace: Replace) -> Result<(), Error> {
    match replace {
        Replace::Never => rename_noreplace(from, to).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                Error::Exists {
                    path: to.to_path_buf(),
                }
            } else {
                Error::io(to, "move into place", e)
            }
        })?,
        Replace::Always => {
            move_over(from, to)?;
            // After an exchange the old one is at `from`.
            remove_any(from);
        }
    }
    sync_dir(parent(to));
    Ok(())
}

/// Removes what is at `path`, a directory or anything else, if anything.
fn remove_any(path: &Path) {
    let _ = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    };
}

/// `rename(from, to)` that fails with [`io::ErrorKind::AlreadyExists`] if anything is at
/// `to`. Where the file system lacks `RENAME_NOREPLACE`, the check and the rename are two
/// steps (a writer in between is not seen).
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

/// The [`Replace::Never`] move of the filled `tmp` onto `path`.
fn move_new(tmp: &Path, path: &Path) -> Result<(), Error> {
    // An empty directory is taken: removed (which fails if it is filled meanwhile, and then the
    // rename below finds it), and made again if the rename fails for another reason.
    let took_empty = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && std::fs::remove_dir(path).is_ok();
    match rename_noreplace(tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(Error::Exists {
            path: path.to_path_buf(),
        }),
        Err(e) => {
            if took_empty {
                let _ = std::fs::create_dir(path);
            }
            Err(Error::io(
                path,
                "move its temporary directory into place",
                e,
            ))
        }
    }
}

/// The [`Replace::Always`] move of the filled `tmp` onto `path`: exchanged with what is there
/// (which then lies at `tmp`), or renamed onto a missing `path`.
fn move_over(tmp: &Path, path: &Path) -> Result<(), Error> {
    let err = |e: io::Error| Error::io(path, "move its temporary directory into place", e);
    for _ in 0..MAX_MOVE_TRIES {
        match renameat_with(CWD, tmp, CWD, path, RenameFlags::EXCHANGE) {
            Ok(()) => return Ok(()),
            Err(Errno::NOENT) => match rename_noreplace(tmp, path) {
                Ok(()) => return Ok(()),
                // Another writer's appeared between the two: exchange with it.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(err(e)),
            },
            Err(Errno::INVAL | Errno::NOSYS) => return move_aside(tmp, path).map_err(err),
            Err(e) => return Err(err(e.into())),
        }
    }
    Err(err(io::Error::other(format!(
        "other writers kept replacing it ({MAX_MOVE_TRIES} tries)"
    ))))
}

/// [`move_over`] without `RENAME_EXCHANGE`: the old directory renamed aside (a temporary name
/// of the same scheme), the new one renamed in, the old one removed; put back on failure.
fn move_aside(tmp: &Path, path: &Path) -> io::Result<()> {
    let mut aside = tmp.as_os_str().to_os_string();
    aside.push("old");
    let aside = PathBuf::from(aside);
    let had_old = match std::fs::rename(path, &aside) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    if let Err(e) = rename_noreplace(tmp, path) {
        if had_old {
            let _ = std::fs::rename(&aside, path);
        }
        return Err(e);
    }
    remove_any(&aside);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn fill_with(text: &'static str) -> impl FnOnce(&Path) -> Result<(), Error> {
        move |d| std::fs::write(d.join("model.bpk"), text).map_err(io_at(d, "write"))
    }

    #[test]
    fn no_replace_refuses_a_directory_that_appeared_while_filling() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("imported");
        let err = write_dir_atomic(&out, Replace::Never, |d| {
            std::fs::create_dir(&out).unwrap();
            std::fs::write(out.join("theirs"), b"x").unwrap();
            fill_with("ours")(d)
        })
        .unwrap_err();
        assert!(err.is_exists(), "{err}");
        assert!(err.to_string().contains("imported"), "{err}");
        assert_eq!(names(&out), ["theirs"]);
        assert_eq!(names(parent.path()), ["imported"]);
    }

    #[test]
    fn an_empty_or_missing_directory_is_taken_without_force() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("m");
        write_dir_atomic(&out, Replace::Never, fill_with("one")).unwrap();
        assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"one");
        let empty = parent.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        write_dir_atomic(&empty, Replace::Never, fill_with("two")).unwrap();
        assert_eq!(names(&empty), ["model.bpk"]);
        let err = write_dir_atomic(&out, Replace::Never, fill_with("three")).unwrap_err();
        assert!(err.is_exists(), "{err}");
        assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"one");
        assert_eq!(names(parent.path()), ["empty", "m"]);
    }

    #[test]
    fn force_replaces_the_old_directory_after_the_new_one_is_in_place() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("m");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old-only"), b"old").unwrap();
        std::fs::set_permissions(&out, Permissions::from_mode(0o750)).unwrap();
        write_dir_atomic(&out, Replace::Always, fill_with("new")).unwrap();
        assert_eq!(names(&out), ["model.bpk"]);
        assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"new");
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
        assert_eq!(names(parent.path()), ["m"]);
        // Onto a missing name as well.
        let fresh = parent.path().join("fresh");
        write_dir_atomic(&fresh, Replace::Always, fill_with("x")).unwrap();
        assert_eq!(names(&fresh), ["model.bpk"]);
    }

    /// A fill that fails half-way (a full disk, a crash of the writer's code) leaves the old
    /// directory whole and no temporary.
    #[test]
    fn a_failed_fill_leaves_the_original() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("m");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("model.bpk"), b"old").unwrap();
        for replace in [Replace::Never, Replace::Always] {
            let err = write_dir_atomic(&out, replace, |d| {
                std::fs::write(d.join("model.bpk"), b"half").unwrap();
                Err(Error::io(
                    d,
                    "write",
                    io::Error::other("No space left on device"),
                ))
            })
            .unwrap_err();
            assert!(err.to_string().contains("No space left"), "{err}");
            assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"old");
            assert_eq!(names(parent.path()), ["m"]);
        }
    }
}
