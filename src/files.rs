//! Files read whole: regular files only, and no further than a limit.
//!
//! What the server polls (certificate, key, client CA, configuration) is
//! mounted from a Secret or a ConfigMap, and neither holds more than
//! [`MAX_MOUNTED_BYTES`]. A path that is something else says the mount is
//! wrong: a link to `/dev/zero` never ends and a read of it grows until
//! the kernel kills the process; a FIFO blocks its reader until some
//! writer comes, forever if none does. So the file is opened without
//! waiting (`O_NONBLOCK`: a FIFO opens at once), refused unless it is a
//! regular file, refused if it says it is larger than the limit, and read
//! no further than one byte past the limit (it may grow while it is read).
//! Either refusal is an [`std::io::Error`] whose source is a [`FileError`],
//! so every caller's "cannot read" error carries it.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most any Secret or `ConfigMap` holds: the API server refuses either
/// past 1 MiB of data, so no file mounted from one is larger.
pub const MAX_MOUNTED_BYTES: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error(
        "it holds more than {limit} bytes, more than any Secret or ConfigMap can (1 MiB); it was not read further"
    )]
    TooLarge { limit: u64 },
}

impl From<FileError> for io::Error {
    fn from(e: FileError) -> io::Error {
        let kind = match e {
            FileError::NotRegular(_) => io::ErrorKind::InvalidInput,
            FileError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
        };
        io::Error::new(kind, e)
    }
}

/// What a file that is not a regular file is, in words.
#[must_use]
pub fn describe(kind: FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading without waiting on it (a FIFO opens at once),
/// and refuses it unless it is a regular file (after links).
///
/// # Errors
/// What `open` or `fstat` report, or [`FileError::NotRegular`].
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(FileError::NotRegular(describe(kind)).into());
    }
    Ok(file)
}

/// The bytes of the regular file `path`, refused past `limit` bytes before
/// more than `limit + 1` are read.
///
/// # Errors
/// As [`open_regular`], a read error, or [`FileError::TooLarge`].
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let declared = file.metadata()?.len();
    if declared > limit {
        return Err(FileError::TooLarge { limit }.into());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge { limit }.into());
    }
    Ok(bytes)
}

/// [`read_regular`] with the limit of a mounted file.
///
/// # Errors
/// As [`read_regular`].
pub fn read_mounted(path: &Path) -> io::Result<Vec<u8>> {
    read_regular(path, MAX_MOUNTED_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(e: &io::Error) -> Option<FileError> {
        e.get_ref()?.downcast_ref::<FileError>().cloned()
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"0123456789").unwrap();
        assert_eq!(read_regular(&small, 10).unwrap(), b"0123456789");
        let e = read_regular(&small, 9).unwrap_err();
        assert_eq!(refusal(&e), Some(FileError::TooLarge { limit: 9 }));
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);

        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_mounted(&zero).unwrap_err();
        assert_eq!(
            refusal(&e),
            Some(FileError::NotRegular("a character device"))
        );
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );

        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would wait here for ever.
        let e = read_mounted(&fifo).unwrap_err();
        assert_eq!(
            refusal(&e),
            Some(FileError::NotRegular("a FIFO (named pipe)"))
        );

        let e = read_mounted(dir.path()).unwrap_err();
        assert_eq!(refusal(&e), Some(FileError::NotRegular("a directory")));
        assert_eq!(
            read_mounted(&dir.path().join("none")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
