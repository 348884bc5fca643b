//! Files: opening one without blocking, so that a FIFO or a device named where a
//! regular file was expected cannot hang the caller in `open` (a FIFO's open waits for
//! a writer) before it can check what it opened.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading with O_NONBLOCK. Reading a regular file is unaffected by
/// the flag; check the file type (`metadata().is_file()`) before reading anything else.
pub fn open_nonblocking(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}
