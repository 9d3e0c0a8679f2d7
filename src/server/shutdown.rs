//! The shutdown sequence's building blocks. The sequence
//! itself reads top to bottom in [`super::Server::serve`]:
//! ready → (signal) → not ready, still serving for the shutdown delay →
//! stop accepting → drain in-flight requests (bounded) → stop.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// Resolves once `stop` turns true (or its sender is gone). The borrow
/// `wait_for` returns is not `Send`, so it is dropped here, before any await.
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Asks every connection to finish its current request and close, waits for
/// them for at most `timeout`, then aborts the rest. Returns how many were
/// aborted.
pub(crate) async fn drain(
    connections: &mut JoinSet<()>,
    stop: &watch::Sender<bool>,
    timeout: Duration,
) -> usize {
    let _ = stop.send(true);
    let drained = tokio::time::timeout(timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_ok() {
        return 0;
    }
    let aborted = connections.len();
    connections.shutdown().await;
    aborted
}
