//! Kept files: what git would not save in a snapshot — the files it ignores (`.env`,
//! `*.local`, `target/`, `node_modules/`) and untracked nested repositories — moved out of a
//! worktree before it is removed, to `$OCTL_HOME/kept/<RUN>/<NODE>/<N>/` with their relative
//! paths, and moved back by `recover --worktree`.
//!
//! Worktrees live under `$OCTL_HOME/worktrees`, so a move is one `rename` per listed path (an
//! ignored directory is one path, however big); across filesystems it is a copy, then the
//! original is removed. Symbolic links are moved as links, never followed, and nothing is
//! moved from outside the worktree or through a link. Nothing is ever overwritten: a name
//! that is already taken gets a `.octl-N` suffix.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};

/// What a kept directory holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Files and symbolic links (directories are not counted).
    pub files: u64,
    pub bytes: u64,
}

/// Moves each of `paths` (relative to `worktree`, as git lists them) to the same relative
/// path under `dest`, which is created when there is something to move. Paths that are gone,
/// or that would lead outside the worktree or through a symbolic link, are left alone.
/// Returns what `dest` holds afterwards (`None`: nothing was, or had been, moved there).
pub fn keep(worktree: &Path, paths: &[PathBuf], dest: &Path) -> io::Result<Option<Tally>> {
    for rel in paths {
        let Some(from) = inside(worktree, rel) else {
            continue;
        };
        if fs::symlink_metadata(&from).is_err() {
            continue;
        }
        let to = free_name(&dest.join(rel));
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        move_tree(&from, &to)?;
    }
    if fs::symlink_metadata(dest).is_err() {
        return Ok(None);
    }
    tally(dest).map(Some)
}

/// Moves everything under `kept` into `worktree` at the same relative paths, merging into
/// directories that exist there; what would replace something in the worktree stays in
/// `kept`. Removes `kept` when it ends up empty. Returns (moved back, left in `kept`).
pub fn restore(kept: &Path, worktree: &Path) -> io::Result<(Tally, Tally)> {
    let mut moved = Tally::default();
    if fs::symlink_metadata(kept).is_err() {
        // Removed by hand: nothing to give back.
        return Ok((moved, Tally::default()));
    }
    restore_into(kept, worktree, &mut moved)?;
    let left = if fs::symlink_metadata(kept).is_ok() {
        tally(kept)?
    } else {
        Tally::default()
    };
    if left.files == 0 {
        let _ = fs::remove_dir_all(kept);
    }
    Ok((moved, left))
}

fn restore_into(from: &Path, to: &Path, moved: &mut Tally) -> io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let src_is_dir = entry.file_type()?.is_dir();
        match fs::symlink_metadata(&dst) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let t = tally(&src)?;
                move_tree(&src, &dst)?;
                moved.files += t.files;
                moved.bytes += t.bytes;
            }
            Ok(m) if m.is_dir() && src_is_dir => {
                restore_into(&src, &dst, moved)?;
                let _ = fs::remove_dir(&src);
            }
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Counts the files (and links) under `path` and their bytes, following no link.
pub fn tally(path: &Path) -> io::Result<Tally> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok(Tally {
            files: 1,
            bytes: if meta.is_file() { meta.len() } else { 0 },
        });
    }
    let mut t = Tally::default();
    for entry in fs::read_dir(path)? {
        let sub = tally(&entry?.path())?;
        t.files += sub.files;
        t.bytes += sub.bytes;
    }
    Ok(t)
}

/// `worktree/rel` when `rel` is a plain relative path and every directory on the way is a
/// real directory of the worktree (not a link that leads elsewhere).
fn inside(worktree: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = worktree.to_path_buf();
    let mut parts = rel.components().peekable();
    parts.peek()?;
    while let Some(c) = parts.next() {
        let Component::Normal(name) = c else {
            return None;
        };
        if name == ".git" {
            return None;
        }
        at.push(name);
        if parts.peek().is_some() && !fs::symlink_metadata(&at).ok()?.is_dir() {
            return None;
        }
    }
    Some(at)
}

/// `path` itself when nothing is there, else the first free `path.octl-N`.
fn free_name(path: &Path) -> PathBuf {
    if fs::symlink_metadata(path).is_err() {
        return path.to_path_buf();
    }
    (1..)
        .map(|n| {
            let mut name: OsString = path.as_os_str().to_owned();
            name.push(format!(".octl-{n}"));
            PathBuf::from(name)
        })
        .find(|p| fs::symlink_metadata(p).is_err())
        .expect("some suffix is free")
}

/// `rename`, or across filesystems a copy (links as links) and then the original removed.
/// `to` must not exist.
pub fn move_tree(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_tree(from, to)?;
            let meta = fs::symlink_metadata(from)?;
            if meta.is_dir() {
                fs::remove_dir_all(from)
            } else {
                fs::remove_file(from)
            }
        }
        Err(e) => Err(e),
    }
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        symlink(fs::read_link(from)?, to)
    } else if kind.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        fs::set_permissions(to, meta.permissions())
    } else if kind.is_file() {
        fs::copy(from, to).map(|_| ())
    } else {
        // A socket or a fifo holds no data to keep.
        Ok(())
    }
}

/// The first `<N>` (from 1) with no directory `dir/<N>` yet, made now so that no one else
/// takes it.
pub fn fresh_numbered(dir: &Path) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    for n in 1u64.. {
        let p = dir.join(n.to_string());
        match fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("some number is free")
}

/// The highest-numbered `dir/<N>` that exists, if any.
pub fn latest_numbered(dir: &Path) -> Option<PathBuf> {
    fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let n: u64 = e.file_name().to_str()?.parse().ok()?;
            Some((n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn keeps_then_restores_without_overwriting_or_following_links() {
        let t = tempfile::tempdir().unwrap();
        let (wt, dest, out) = (
            t.path().join("wt"),
            t.path().join("kept/1"),
            t.path().join("out"),
        );
        write(&wt.join("notes.local"), "mine\n");
        write(&wt.join("target/a/b.o"), "12345");
        write(&wt.join("target/c.o"), "1");
        write(&t.path().join("elsewhere/secret"), "no");
        symlink(t.path().join("elsewhere"), wt.join("link")).unwrap();
        let rels: Vec<PathBuf> = [
            "notes.local",
            "target/",
            "link",
            "link/secret",
            "../x",
            "gone",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let tally = keep(&wt, &rels, &dest).unwrap().unwrap();
        assert_eq!(
            tally,
            Tally {
                files: 4,
                bytes: 11
            }
        );
        assert!(!wt.join("target").exists() && !wt.join("notes.local").exists());
        assert!(fs::symlink_metadata(dest.join("link"))
            .unwrap()
            .is_symlink());
        assert!(
            t.path().join("elsewhere/secret").exists(),
            "a link is not followed"
        );
        // Kept again into the same place: the old one is not overwritten.
        write(&wt.join("notes.local"), "second\n");
        keep(&wt, &rels[..1], &dest).unwrap();
        assert_eq!(
            fs::read_to_string(dest.join("notes.local")).unwrap(),
            "mine\n"
        );
        assert_eq!(
            fs::read_to_string(dest.join("notes.local.octl-1")).unwrap(),
            "second\n"
        );
        // Back, except what the worktree already has.
        write(&out.join("target/c.o"), "theirs");
        let (moved, left) = restore(&dest, &out).unwrap();
        assert_eq!(moved.files, 4);
        assert_eq!(left, Tally { files: 1, bytes: 1 });
        assert_eq!(
            fs::read_to_string(out.join("target/a/b.o")).unwrap(),
            "12345"
        );
        assert_eq!(
            fs::read_to_string(out.join("target/c.o")).unwrap(),
            "theirs"
        );
        assert_eq!(fs::read_to_string(dest.join("target/c.o")).unwrap(), "1");
        assert!(keep(&wt, &[], &t.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn copies_across_filesystems_the_same_way() {
        let t = tempfile::tempdir().unwrap();
        write(&t.path().join("a/x/y"), "y");
        symlink("y", t.path().join("a/x/l")).unwrap();
        copy_tree(&t.path().join("a"), &t.path().join("b")).unwrap();
        assert_eq!(fs::read_to_string(t.path().join("b/x/y")).unwrap(), "y");
        assert_eq!(
            fs::read_link(t.path().join("b/x/l")).unwrap(),
            Path::new("y")
        );
    }

    #[test]
    fn numbered_directories_are_never_shared() {
        let t = tempfile::tempdir().unwrap();
        let a = fresh_numbered(t.path()).unwrap();
        let b = fresh_numbered(t.path()).unwrap();
        assert_ne!(a, b);
        assert_eq!(latest_numbered(t.path()), Some(b));
    }
}
