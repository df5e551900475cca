//! A workspace directory as a ZIP (`sandbox_files_download_dir`): walked descriptor-relative
//! and beneath the directory, links neither followed nor stored, FIFOs and devices skipped, cut
//! off as soon as it outgrows `ZIP_CAP`.

use crate::beneath::fd_path;
use crate::error::{ApiError, Result};
use crate::files::{explain, open, openat_beneath, Resolved};
use handoff_wire::ZIP_CAP;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// A ZIP of a directory (symlinks are not followed or stored), refused beyond `ZIP_CAP`.
pub fn zip_dir(home: &Path, r: &Resolved) -> Result<Vec<u8>> {
    let dir = open(home, r, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let written = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut writer = zip::ZipWriter::new(Counted {
        inner: io::Cursor::new(Vec::new()),
        size: written.clone(),
    });
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let too_large = || {
        ApiError::too_large(format!(
            "{} as a ZIP exceeds {ZIP_CAP} bytes (10 MiB); download a smaller directory, or pack \
             selected files with a command",
            r.display
        ))
    };
    // Every open is relative to the directory's fd and beneath it, so a process in the sandbox
    // swapping a directory for a symlink mid-walk cannot make the daemon read host files.
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let sub = openat_beneath(
            &dir,
            &rel,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| explain(e, r))?;
        let sub_path = fd_path(&sub);
        let mut names: Vec<_> = std::fs::read_dir(&sub_path)?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for name in names {
            let rel_child = rel.join(&name);
            let Ok(meta) = std::fs::symlink_metadata(sub_path.join(&name)) else {
                continue;
            };
            let zip_name = rel_child.to_string_lossy().into_owned();
            if meta.is_dir() {
                writer
                    .add_directory(format!("{zip_name}/"), options)
                    .map_err(zip_error)?;
                stack.push(rel_child);
            } else if meta.is_file() {
                if meta.len() > ZIP_CAP * 4 {
                    return Err(too_large());
                }
                let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
                let Ok(fd) = openat_beneath(&dir, &rel_child, flags, 0) else {
                    continue;
                };
                let mut file = File::from(fd);
                // Swapped for a FIFO or device since the listing: skip it, never block on it.
                if !file.metadata().is_ok_and(|m| m.is_file()) {
                    continue;
                }
                writer.start_file(zip_name, options).map_err(zip_error)?;
                io::copy(&mut Read::by_ref(&mut file).take(ZIP_CAP * 4), &mut writer)?;
                if written.get() > ZIP_CAP {
                    return Err(too_large());
                }
            }
        }
    }
    let bytes = writer.finish().map_err(zip_error)?.inner.into_inner();
    if bytes.len() as u64 > ZIP_CAP {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A writer that publishes how many bytes it holds, so a growing ZIP can be cut off early.
struct Counted {
    inner: io::Cursor<Vec<u8>>,
    size: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.size.set(self.inner.get_ref().len() as u64);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl io::Seek for Counted {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

fn zip_error(e: zip::result::ZipError) -> ApiError {
    ApiError::internal(format!("zip: {e}"))
}
