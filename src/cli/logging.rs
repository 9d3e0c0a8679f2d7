//! Logging for the long-running commands (`serve`, `controller`).
//!
//! Lines go to stderr through a writer thread and a bounded queue, never
//! from the thread that logs: a log pipe drained slowly (a busy node's
//! container runtime, a stalled collector) would otherwise hold every
//! review that logs a line. When the queue is full a line is dropped, not
//! waited for, and counted (`log_lines_dropped_total`).

use clap::ValueEnum;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Lines waiting for the writer thread at most. An admission line is a few
/// hundred bytes (request-derived values are cut at 256 characters), so a
/// full queue holds about a MiB; at the rate the webhook logs (one line
/// per review) it covers a second or more of a sink that stopped.
pub const LOG_QUEUE_LINES: usize = 4096;

/// What the writer thread gathers before it writes: the lines it finds
/// queued together go out in one `write`, and it flushes whenever the queue
/// is empty, so a line is never held back while the webhook is idle. At
/// saturation that is one `write` per eight reviews instead of one per
/// review (docs/performance.md, "Server CPU per review: where the gap
/// goes"). At most `PIPE_BUF` (4 KiB), so that each write to a pipe stays
/// atomic and nothing else written to stderr (a panic's message) can land
/// inside a line.
const LOG_WRITE_BYTES: usize = 4096;

/// The installed logging: lines still queued are written when it is
/// dropped (for at most a second), so it lives as long as the command.
pub(super) struct Logging {
    _flush: Option<WorkerGuard>,
    /// Lines dropped because the queue was full; `None` when an embedding
    /// program's subscriber was already installed.
    pub dropped: Option<ErrorCounter>,
}

/// Installs the `tracing` subscriber `serve` and `controller` log through:
/// stderr through the bounded queue, the level from `RUST_LOG` (info by
/// default).
pub(super) fn init_logging(format: LogFormat) -> Logging {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal; log collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, flush) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .thread_name("log-writer")
        .finish(std::io::BufWriter::with_capacity(
            LOG_WRITE_BYTES,
            std::io::stderr(),
        ));
    let dropped = writer.error_counter();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    // `try_init`: a subscriber installed by an embedding program wins.
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
    };
    match installed {
        Ok(()) => Logging {
            _flush: Some(flush),
            dropped: Some(dropped),
        },
        Err(_) => Logging {
            _flush: None,
            dropped: None,
        },
    }
}
