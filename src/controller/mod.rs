//! The lifecycle controller (contract: controller.watch, controller.leader):
//! removes expired sandboxes at their expiry time and reports Pending sandboxes
//! that no node's platform fits.
//!
//! Layering mirrors the webhook's: the decisions are `crate::lifecycle`
//! (pure, also behind `diagnose`); [`runtime`] is the watch and the timers;
//! [`actions`] is every write; this module wires the admin port, the
//! Kubernetes client and leader election. Only the replica that holds the
//! `coordination.k8s.io/v1` Lease watches and acts; the others wait.

pub mod actions;
mod admin;
pub mod cache;
pub mod fleet;
pub mod initial_list;
mod memory;
pub(crate) mod metrics;
mod resource;
pub(crate) mod runtime;
mod timers;
pub mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use thiserror::Error;
use tokio::sync::watch;

use crate::config::{Config, ConfigError};
use crate::lifecycle;

/// How long shutdown waits for the Lease to be released and the admin port
/// to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// Unique per replica: the Lease's `holderIdentity`.
    pub identity: String,
    /// `leaseDurationSeconds`: a standby takes over at most this long after
    /// the leader's last renewal.
    pub duration_seconds: u64,
    /// The holder renews this long before the lease would run out.
    pub grace_seconds: u64,
}

#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub config_path: Option<PathBuf>,
    pub admin_addr: SocketAddr,
    /// The controller's own namespace, ignored like the excluded ones.
    pub own_namespace: Option<String>,
    pub lease: LeaseSettings,
    /// How the watch fills the cache (`--initial-list`).
    pub initial_list: initial_list::InitialList,
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ControllerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on the admin address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("no Kubernetes API access (in-cluster service account or KUBECONFIG): {0}")]
    Client(#[source] kube::Error),
    #[error("leader election on Lease {namespace}/{name} failed: {source}")]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: LeaseManagerError,
    },
}

/// Runs until `shutdown` resolves, then stops acting, releases the Lease
/// (so a standby takes over at once) and returns.
///
/// # Errors
/// The configuration, binding the admin port, the Kubernetes client or the
/// Lease manager, whichever fails first; nothing fails after start-up.
pub async fn run(
    settings: ControllerSettings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControllerError> {
    let config = match &settings.config_path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    for warning in config.controller.warnings() {
        tracing::warn!("{warning}");
    }
    let metrics = Arc::new(metrics::ControllerMetrics::new());
    let ready = admin::Readiness::default();
    let listener =
        admin::bind(settings.admin_addr)
            .await
            .map_err(|source| ControllerError::Bind {
                addr: settings.admin_addr,
                source,
            })?;
    let admin_addr = listener.local_addr().unwrap_or(settings.admin_addr);
    let (admin_stop, mut admin_stopped) = watch::channel(false);
    let admin_task = tokio::spawn(admin::serve(
        listener,
        ready.clone(),
        Arc::clone(&metrics),
        async move {
            let _ = admin_stopped.wait_for(|stop| *stop).await;
        },
    ));

    let client = Client::try_default()
        .await
        .map_err(ControllerError::Client)?;
    let lease = &settings.lease;
    let lease_error = |source| ControllerError::Lease {
        namespace: lease.namespace.clone(),
        name: lease.name.clone(),
        source,
    };
    let manager = LeaseManagerBuilder::new(client.clone(), &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&lease.identity)
        .with_duration(lease.duration_seconds)
        .with_grace(lease.grace_seconds)
        .build()
        .await
        .map_err(lease_error)?;
    let (mut leader, lease_task) = manager.watch().await;

    let streaming = streaming_list(&client, settings.initial_list).await;
    let shared = Arc::new(writes::Shared {
        streaming_list: streaming,
        rules: Arc::new(fleet::Rules::new(config, settings.own_namespace.clone())),
        actions: actions::Actions::new(client.clone(), lease.identity.clone()),
        metrics: Arc::clone(&metrics),
    });
    ready.set(true);
    tracing::info!(
        %admin_addr,
        identity = %lease.identity,
        lease = %format!("{}/{}", lease.namespace, lease.name),
        "controller started; waiting for leadership"
    );

    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            changed = leader.changed() => {
                if changed.is_err() {
                    tracing::error!("leader election stopped");
                    break;
                }
            }
        }
        if !*leader.borrow_and_update() {
            continue;
        }
        tracing::info!(identity = %lease.identity, "leadership acquired; watching sandbox pods");
        metrics.set_leader(true);
        let lost = async {
            while leader.changed().await.is_ok() {
                if !*leader.borrow_and_update() {
                    return;
                }
            }
        };
        let asked_to_stop = tokio::select! {
            () = &mut shutdown => true,
            () = runtime::run(Arc::clone(&shared), client.clone(), lost) => false,
        };
        metrics.set_leader(false);
        if asked_to_stop {
            break;
        }
        tracing::warn!(identity = %lease.identity, "leadership lost; standing by");
    }

    ready.set(false);
    // Closing the channel makes the lease task release the Lease.
    drop(leader);
    log_lease_release(lease_task).await;
    let _ = admin_stop.send(true);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, admin_task).await;
    Ok(())
}

/// Whether the pod watch uses the streaming list, and the log line that
/// says which it is.
async fn streaming_list(client: &Client, choice: initial_list::InitialList) -> bool {
    let pods: kube::Api<lifecycle::SandboxPod> = kube::Api::all(client.clone());
    let streaming = initial_list::use_streaming(choice, &pods).await;
    tracing::info!(
        ?choice,
        initial_list = if streaming {
            "streaming (sendInitialEvents)"
        } else {
            "list"
        },
        "how the pod watch fills its cache"
    );
    streaming
}

/// Waits (for at most the grace) for the lease task to release the Lease,
/// and says how that went.
async fn log_lease_release<T, E: std::fmt::Display>(
    lease_task: tokio::task::JoinHandle<Result<T, E>>,
) {
    match tokio::time::timeout(SHUTDOWN_GRACE, lease_task).await {
        Ok(Ok(Ok(_))) => tracing::info!("lease released"),
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "cannot release the lease"),
        Ok(Err(e)) => tracing::warn!(error = %e, "lease task failed"),
        Err(_) => tracing::warn!("lease not released within {SHUTDOWN_GRACE:?}"),
    }
}
