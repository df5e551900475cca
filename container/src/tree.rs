//! Walking a workspace from the host without following anything out of it: every directory is
//! opened relative to the walk's root with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, entries are
//! `lstat`ed relative to their directory's descriptor, and links are reported, never followed.
//! Used for snapshots and for handing a tree to the sandbox's user.

use crate::beneath::{self, Links};
use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    /// FIFOs, sockets, devices: listed, never opened.
    Other,
}

/// One entry met by a walk.
pub struct Entry<'a> {
    /// Path relative to the walk's root.
    pub relative: &'a Path,
    /// The directory that holds it, and its name there.
    pub parent: &'a OwnedFd,
    pub name: &'a OsString,
    pub kind: Kind,
    pub stat: &'a libc::stat,
}

fn kind_of(st: &libc::stat) -> Kind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// Visits every entry below `root`, parents before their children, names sorted.
pub fn walk(root: &OwnedFd, visit: &mut dyn FnMut(&Entry) -> io::Result<()>) -> io::Result<()> {
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = beneath::open(
            root,
            &rel,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
            Links::Never,
        )?;
        let mut names: Vec<OsString> = std::fs::read_dir(beneath::fd_path(&dir))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            let Ok(stat) = beneath::stat_at(&dir, &name) else {
                continue;
            };
            let relative = rel.join(&name);
            let kind = kind_of(&stat);
            visit(&Entry {
                relative: &relative,
                parent: &dir,
                name: &name,
                kind,
                stat: &stat,
            })?;
            if kind == Kind::Dir {
                subdirs.push(relative);
            }
        }
        // Reversed so the stack pops them in name order.
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// Makes `uid` the owner of `dir` and of everything below it (links themselves, not their
/// targets).
pub fn chown_all(dir: &Path, uid: u32) -> io::Result<()> {
    let root = beneath::open_dir(dir)?;
    beneath::chown_at(&root, std::ffi::OsStr::new(""), uid)?;
    walk(&root, &mut |entry| {
        beneath::chown_at(entry.parent, entry.name, uid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_in_order_without_following_links() {
        let dir = std::env::temp_dir().join(format!("handoff-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("w/b/c")).unwrap();
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        std::fs::write(dir.join("outside/secret"), "x").unwrap();
        std::fs::write(dir.join("w/a"), "a").unwrap();
        std::fs::write(dir.join("w/b/c/d"), "d").unwrap();
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("w/link")).unwrap();
        let root = beneath::open_dir(&dir.join("w")).unwrap();
        let mut seen = Vec::new();
        walk(&root, &mut |e| {
            seen.push((e.relative.display().to_string(), e.kind));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                ("a".to_string(), Kind::File),
                ("b".to_string(), Kind::Dir),
                ("link".to_string(), Kind::Symlink),
                ("b/c".to_string(), Kind::Dir),
                ("b/c/d".to_string(), Kind::File),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
