//! Reading a command's input and writing its output, the same way for every
//! subcommand: `-` is standard input, a directory holds manifests, and a
//! failed write is exit code 2.

use std::io::{Read, Write};
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
pub(super) fn sources(files: &[PathBuf], recursive: bool) -> Result<Vec<Source>, String> {
    let mut paths = Vec::new();
    let mut stdin = false;
    for file in files {
        if file.as_os_str() == "-" {
            if stdin {
                return Err("-f - (standard input) can be given once".to_owned());
            }
            stdin = true;
            paths.push(file.clone());
        } else if file.is_dir() {
            let before = paths.len();
            walk(file, recursive, &mut paths)?;
            if paths.len() == before {
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
        } else {
            paths.push(file.clone());
        }
    }
    paths
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

/// The manifest files of `dir`, sorted, and of its subdirectories when
/// `recursive`.
fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let read_err = |e: std::io::Error| format!("cannot read {}: {e}", dir.display());
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()).map_err(read_err))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if recursive {
                walk(&path, recursive, out)?;
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            out.push(path);
        }
    }
    Ok(())
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
