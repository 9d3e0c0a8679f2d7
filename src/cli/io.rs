//! Reading a command's input and writing its output, the same way for every
//! subcommand: `-` is standard input, a directory holds manifests, and a
//! failed write is exit code 2.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::exit;

/// The bytes of `path`, or of standard input when it is `-`.
pub(super) fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

/// One input of a command that reads manifests.
pub(super) struct Source {
    /// The path as given (`-` for standard input), for diff headers.
    pub path: String,
    /// How messages name it.
    pub label: String,
    pub text: String,
}

/// The inputs `-f` names, as kubectl reads them: each `-f` a file, `-`
/// (standard input, once), or a directory whose `.yaml`, `.yml` and `.json`
/// files are read in name order (with `recursive`, those of its
/// subdirectories too).
///
/// Each file is read once, however many names lead to it (a link, a file
/// named twice, a link back up the tree that would otherwise be followed
/// until the path is too long). A file in a directory that is not a
/// regular file (a FIFO would block the read for ever, a device never
/// end) is passed over with a message; so is a device or socket named
/// with `-f`. A FIFO named with `-f` is read, as standard input is
/// (`-f <(kubectl get ...)`).
pub(super) fn sources(files: &[PathBuf], recursive: bool) -> Result<Vec<Source>, String> {
    let mut found = Found::default();
    let mut stdin = false;
    for file in files {
        if file.as_os_str() == "-" {
            if stdin {
                return Err("-f - (standard input) can be given once".to_owned());
            }
            stdin = true;
            found.paths.push(file.clone());
            continue;
        }
        let meta =
            std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        if meta.is_dir() {
            let before = found.paths.len();
            found.walk(file, &meta, recursive)?;
            if found.paths.len() == before {
                return Err(format!(
                    "{} holds no .yaml, .yml or .json files{}",
                    file.display(),
                    if recursive {
                        ""
                    } else {
                        " (-R reads its subdirectories)"
                    }
                ));
            }
        } else if meta.file_type().is_fifo() {
            found.paths.push(file.clone());
        } else {
            found.file(file, &meta);
        }
    }
    if found.paths.is_empty() {
        return Err("no manifest to read: every file named was passed over".to_owned());
    }
    found
        .paths
        .into_iter()
        .map(|path| {
            let bytes = read_input(&path)?;
            let stdin = path.as_os_str() == "-";
            let label = if stdin {
                "standard input".to_owned()
            } else {
                path.display().to_string()
            };
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("{label} is not UTF-8 text, so it is no manifest"))?;
            Ok(Source {
                path: path.display().to_string(),
                label,
                text,
            })
        })
        .collect()
}

/// The files to read, in order, and the files and directories already
/// found (device and inode), so that none is read or walked twice.
#[derive(Default)]
struct Found {
    paths: Vec<PathBuf>,
    seen: HashSet<(u64, u64)>,
}

impl Found {
    /// A file to read, unless it is not a regular file or was found before.
    fn file(&mut self, path: &Path, meta: &std::fs::Metadata) {
        if !meta.is_file() {
            eprintln!(
                "warning: {} is {}, not a regular file: passed over",
                path.display(),
                crate::files::describe(meta.file_type())
            );
        } else if self.seen.insert((meta.dev(), meta.ino())) {
            self.paths.push(path.to_owned());
        } else {
            eprintln!(
                "note: {} is a file already read (another name for it): read once",
                path.display()
            );
        }
    }

    /// The manifest files of `dir`, sorted, and of its subdirectories when
    /// `recursive`; a directory already walked (through a link) is not
    /// walked again.
    fn walk(
        &mut self,
        dir: &Path,
        meta: &std::fs::Metadata,
        recursive: bool,
    ) -> Result<(), String> {
        if !self.seen.insert((meta.dev(), meta.ino())) {
            eprintln!(
                "note: {} is a directory already read (through a link): passed over",
                dir.display()
            );
            return Ok(());
        }
        let read_err = |e: std::io::Error| format!("cannot read {}: {e}", dir.display());
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .map(|e| e.map(|e| e.path()).map_err(read_err))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for path in entries {
            // Links followed; a broken one is left to the read to report.
            let meta = std::fs::metadata(&path);
            if let Ok(meta) = &meta
                && meta.is_dir()
            {
                if recursive {
                    self.walk(&path, meta, recursive)?;
                }
                continue;
            }
            let manifest = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
            match meta {
                _ if !manifest => {}
                Ok(meta) => self.file(&path, &meta),
                Err(_) => self.paths.push(path),
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to standard output and flushes: exit 0, or 2 when the
/// output cannot be written (a closed pipe, a full disk).
pub(super) fn write_stdout(bytes: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(format!("cannot write output: {e}")),
    }
}
