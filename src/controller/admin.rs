//! The controller's plain-HTTP admin port: `/livez`, `/readyz`, `/metrics`,
//! the same routes as `serve`'s. It carries no traffic from users, so it
//! needs no limits beyond axum's defaults.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::metrics::ControllerMetrics;
use crate::server::admin::probes;

/// Ready once the controller has a client and takes part in the election;
/// a standby is ready too (it serves nothing, and must not be restarted).
pub(crate) use crate::server::shutdown::Readiness;

pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

pub async fn serve(
    listener: TcpListener,
    ready: Readiness,
    metrics: Arc<ControllerMetrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, probes(ready, metrics))
        .with_graceful_shutdown(shutdown)
        .await
}
