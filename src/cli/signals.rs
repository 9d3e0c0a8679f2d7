//! SIGTERM and SIGINT for the long-running commands (`serve`,
//! `controller`). The first starts a graceful shutdown; a second one exits
//! at once (an operator who asks twice does not want to wait).

use tokio::signal::unix::{Signal, SignalKind, signal};

pub(super) struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Listens from now on, so a signal sent before [`Signals::first`] is
    /// awaited is not lost.
    pub(super) fn new() -> std::io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }

    /// Resolves at the first signal, logging that shutdown began and what
    /// it does (`doing`, after "shutdown requested"); from then on a
    /// second signal exits with code 130.
    pub(super) async fn first(mut self, doing: &'static str) {
        let name = self.next().await;
        tracing::info!(
            signal = name,
            "shutdown requested{doing}; a second signal exits immediately"
        );
        tokio::spawn(async move {
            let name = self.next().await;
            tracing::warn!(signal = name, "second signal: exiting without draining");
            std::process::exit(130);
        });
    }
}
