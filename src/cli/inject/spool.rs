//! `-o manifest`'s text on its way to standard output (contract:
//! manifest.inputs). Each document's text goes to an unlinked temporary
//! file as soon as it is injected, and its notes, warnings and denials to
//! standard error; the file is copied out only once every document was
//! admitted, since a denial prints nothing. So `inject` holds one document
//! at a time besides its input, not the whole of its output (about 1.5 KiB
//! a pod).

use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};

use super::report::report;
use crate::manifest::{Injector, Syntax};

pub(super) struct Spool {
    file: BufWriter<File>,
    /// The first write that failed: reported once, at the end.
    error: Option<io::Error>,
    /// The inputs started so far, and whether the current one has written
    /// anything: the inputs are joined as one YAML stream, each after the
    /// first starting a document of its own.
    sources: usize,
    source_empty: bool,
    /// Whether a denial has been reported.
    pub(super) denied: bool,
    pub(super) quiet: bool,
}

impl Spool {
    pub(super) fn new(quiet: bool) -> io::Result<Self> {
        Ok(Spool {
            file: BufWriter::new(tempfile::tempfile()?),
            error: None,
            sources: 0,
            source_empty: true,
            denied: false,
            quiet,
        })
    }

    /// The next input begins.
    pub(super) fn start_source(&mut self) {
        if self.sources > 0 {
            self.end_source();
        }
        self.sources += 1;
        self.source_empty = true;
    }

    /// An input after the first that wrote nothing still starts its
    /// document.
    fn end_source(&mut self) {
        if self.sources > 1 && self.source_empty {
            self.write(b"---\n");
            self.source_empty = false;
        }
    }

    /// `text`, the next of the current input's text.
    pub(super) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.source_empty {
            if self.sources > 1 && !text.starts_with("---") {
                self.write(b"---\n");
            }
            self.source_empty = false;
        }
        self.write(text.as_bytes());
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_none()
            && let Err(e) = self.file.write_all(bytes)
        {
            self.error = Some(e);
        }
    }

    /// What the current input has written and reported since the last
    /// call: its text (a JSON input's only at the end, `syntax` JSON
    /// keeping it, since one object is the whole text) and the injector's
    /// entries, printed now and dropped.
    pub(super) fn drain(
        &mut self,
        text: &mut String,
        injector: &mut Injector<'_, '_>,
        syntax: Syntax,
    ) {
        if syntax == Syntax::Yaml {
            self.push(text);
            text.clear();
        }
        self.denied |= injector.denied();
        report(&injector.entries, self.quiet);
        injector.entries.clear();
    }

    /// Everything spooled, to standard output.
    pub(super) fn copy_to_stdout(mut self) -> Result<(), String> {
        self.end_source();
        if let Some(e) = self.error {
            return Err(format!("cannot hold the output in a temporary file: {e}"));
        }
        let mut file = self
            .file
            .into_inner()
            .map_err(|e| format!("cannot hold the output in a temporary file: {e}"))?;
        file.rewind()
            .map_err(|e| format!("cannot read the output back: {e}"))?;
        let mut out = io::stdout().lock();
        io::copy(&mut file, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| format!("cannot write output: {e}"))
    }
}
