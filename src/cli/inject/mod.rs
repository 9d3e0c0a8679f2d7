//! `inject`: manifests in, as repositories keep them (contract:
//! manifest.inputs): one Pod, several YAML documents, a `List`, workloads whose
//! pod template is injected as `istioctl kube-inject` does, from files,
//! directories or standard input. The reading and injecting is
//! [`crate::manifest`]'s; this is what is printed, and where.
//!
//! An object the webhook does not change is written back as the text it was
//! read from, comments and key order included, with the `---` line it had
//! (or none). A changed object is written by [`yaml`] (or as JSON, for a
//! JSON input), in its own key order, with ambiguous strings quoted.

mod report;
mod spool;
mod views;

use std::process::ExitCode;

use serde_json::Value;

use std::path::PathBuf;

use super::args::DecisionArgs;
use super::exit;
use super::io::{Source, write_stdout};
use crate::manifest::{self, Entry, Injector, Judged, Syntax, yaml};
use report::report;
use spool::Spool;
use views::{Color, InjectOutput};

#[derive(Debug, clap::Args)]
pub struct InjectArgs {
    /// A manifest (YAML or JSON: a Pod, workloads, a List, several
    /// documents), a directory of them (.yaml, .yml, .json), or `-` for
    /// standard input; repeat it for several.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Read the directories given with -f and their subdirectories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// What to print: the manifests as read (changed objects rewritten),
    /// every object as YAML or JSON, the JSON patch of the one object, or
    /// a unified diff per file of the input and what -o manifest writes
    /// (exit 1 when there are changes, as `kubectl diff`).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: InjectOutput,
    /// Colour the diff of -o diff: auto (when standard output is a
    /// terminal and `NO_COLOR` is not set), always or never.
    #[arg(long, value_enum, default_value_t, value_name = "WHEN")]
    pub color: Color,
    /// Leave out the notes on standard error (a Pod or template skipped,
    /// an object passed through, the token left out of a template);
    /// warnings and denials are still printed.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// One input after injection.
struct Written<'s> {
    source: &'s Source,
    syntax: Syntax,
    /// What `-o manifest` prints for it.
    text: String,
    /// Its objects, before and after: kept only where the output needs
    /// them (`-o json`, `-o patch`, a JSON input), so that a stream of many
    /// documents holds its text, not every document's values.
    objects: Vec<(Value, Value)>,
    /// Whether any object changed.
    changed: bool,
}

pub fn inject(args: &InjectArgs) -> ExitCode {
    let config = match args.decision.load_config() {
        Ok(config) => config,
        Err(e) => return exit::fail(e),
    };
    let sources = match super::io::sources(&args.files, args.recursive) {
        Ok(sources) => sources,
        Err(e) => return exit::fail(e),
    };
    let tokens = args.decision.tokens();
    let ctx = args.decision.context(&config, tokens.as_ref());
    let mut injector = Injector::new(&ctx);
    let lone_pod = lone_pod(&sources);
    // Only a lone Pod's patch is printed (-o patch).
    injector.keep_patches = lone_pod;
    let keep_objects = matches!(args.output, InjectOutput::Json | InjectOutput::Patch);
    let several = sources.len() > 1;
    // -o manifest is written as it is injected (spool.rs); the other
    // outputs need every object first.
    let mut spool = if args.output == InjectOutput::Manifest {
        match Spool::new(args.quiet) {
            Ok(spool) => Some(spool),
            Err(e) => {
                return exit::fail(format!("cannot make a temporary file for the output: {e}"));
            }
        }
    } else {
        None
    };
    let mut written = Vec::with_capacity(sources.len());
    for source in &sources {
        if let Some(spool) = spool.as_mut() {
            spool.start_source();
        }
        let options = (lone_pod, several);
        match write(source, &mut injector, options, keep_objects, spool.as_mut()) {
            Ok(w) => written.push(w),
            Err(e) => return exit::fail(e),
        }
    }
    report(&injector.entries, args.quiet);
    if let Some(spool) = spool {
        if spool.denied || injector.denied() {
            return exit::REJECTED;
        }
        return match spool.copy_to_stdout() {
            Ok(()) => exit::OK,
            Err(e) => exit::fail(e),
        };
    }
    if injector.denied() {
        return exit::REJECTED;
    }
    let lone_patch = injector.entries.iter().find_map(|e| match e {
        // A lone Pod's patch is the webhook's (none when it is skipped).
        Entry::Judged(Judged { patch, .. }) if lone_pod => Some(patch.clone().unwrap_or_default()),
        _ => None,
    });
    match output(args, written, lone_patch) {
        Ok((text, changes)) => {
            let code = write_stdout(text.as_bytes());
            if code == exit::OK && changes && args.output == InjectOutput::Diff {
                exit::REJECTED
            } else {
                code
            }
        }
        Err(e) => exit::fail(e),
    }
}

/// Whether the inputs are one object, a Pod (its patch is then the
/// webhook's, and messages need not say where it is). Reads no further
/// than the second object.
fn lone_pod(sources: &[Source]) -> bool {
    let [source] = sources else { return false };
    let mut objects = manifest::read(&source.label, &source.text).filter_map(|d| d.ok()?.value);
    let first = objects.next();
    first.is_some_and(|v| v["kind"] == "Pod") && objects.next().is_none()
}

/// Injects every object of one input, one document at a time, and writes
/// its `-o manifest` text: to `spool` as each document is done, with its
/// messages to standard error, or kept whole in [`Written`] without one.
fn write<'s>(
    source: &'s Source,
    injector: &mut Injector<'_, '_>,
    (lone_pod, several): (bool, bool),
    keep_objects: bool,
    mut spool: Option<&mut Spool>,
) -> Result<Written<'s>, manifest::InputError> {
    let mut reading = manifest::read(&source.label, &source.text);
    let syntax = reading.syntax;
    let keep_objects = keep_objects || syntax == Syntax::Json;
    let mut text = if spool.is_some() {
        String::new()
    } else {
        String::with_capacity(source.text.len() * 2)
    };
    let mut objects = Vec::new();
    let mut changed_any = false;
    for (i, doc) in reading.by_ref().enumerate() {
        if let Some(spool) = spool.as_deref_mut() {
            spool.drain(&mut text, injector, syntax);
        }
        let mut doc = doc?;
        let Some(before) = doc.value.take() else {
            push_text(&mut text, doc.text);
            continue;
        };
        let at = match (lone_pod, several, syntax) {
            (true, _, _) => String::new(),
            (false, true, Syntax::Json) => source.label.clone(),
            (false, false, Syntax::Json) => "the object".to_owned(),
            (false, true, Syntax::Yaml) => format!("{}, document {}", source.label, i + 1),
            (false, false, Syntax::Yaml) => format!("document {}", i + 1),
        };
        let mut after = before.clone();
        let raw = (syntax == Syntax::Json).then_some(doc.text);
        let changed = injector.object(&mut after, raw, &at);
        match (changed, syntax) {
            (false, _) => push_text(&mut text, doc.text),
            (true, Syntax::Json) => {
                text = serde_json::to_string_pretty(&after).unwrap_or_default() + "\n";
            }
            (true, Syntax::Yaml) => {
                if let Some(separator) = doc.separator() {
                    text.push_str(separator);
                    text.push('\n');
                }
                text.push_str(&yaml::to_string(&after));
            }
        }
        changed_any |= before != after;
        if keep_objects {
            objects.push((before, after));
        }
    }
    reading.finish()?;
    if let Some(spool) = spool {
        spool.drain(&mut text, injector, Syntax::Yaml);
    }
    Ok(Written {
        source,
        syntax,
        text,
        objects,
        changed: changed_any,
    })
}

/// A document as it was read, ending in a line break.
fn push_text(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

/// What `-o` asks for, and whether anything changed.
fn output(
    args: &InjectArgs,
    written: Vec<Written<'_>>,
    lone_patch: Option<json_patch::Patch>,
) -> Result<(String, bool), String> {
    let changes = written.iter().any(|w| w.changed);
    let text = match args.output {
        InjectOutput::Manifest => joined(written.into_iter().map(|w| w.text)),
        InjectOutput::Yaml => joined(written.into_iter().map(|w| {
            match w.syntax {
                Syntax::Yaml => w.text,
                Syntax::Json => w
                    .objects
                    .iter()
                    .map(|(_, after)| yaml::to_string(after))
                    .collect(),
            }
        })),
        InjectOutput::Json => views::json_text(
            written
                .iter()
                .flat_map(|w| w.objects.iter().map(|(_, after)| after.clone()))
                .collect(),
        )?,
        InjectOutput::Patch => {
            let [w] = written.as_slice() else {
                return Err(patch_refusal());
            };
            let [(before, after)] = w.objects.as_slice() else {
                return Err(patch_refusal());
            };
            let patch = match lone_patch {
                // A Pod: the webhook's own answer.
                Some(patch) => patch,
                None => views::json_diff(before, after)?,
            };
            views::patch_text(&patch)?
        }
        InjectOutput::Diff => {
            let diff: String = written
                .iter()
                .map(|w| views::text_diff(&w.source.text, &w.text, &w.source.path))
                .collect();
            views::colored(&diff, args.color)
        }
    };
    Ok((text, changes))
}

fn patch_refusal() -> String {
    "-o patch takes one object (a JSON patch addresses one object); this input holds several documents or files: use -o diff".to_owned()
}

/// Several inputs' texts as one YAML stream: each starts a document. The
/// first is not copied (one input's text may be most of the memory used).
fn joined(mut texts: impl Iterator<Item = String>) -> String {
    let mut out = texts.next().unwrap_or_default();
    for text in texts {
        if !text.starts_with("---") {
            out.push_str("---\n");
        }
        out.push_str(&text);
    }
    out
}
