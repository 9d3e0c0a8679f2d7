//! The set-up an attack test begins with, one call where each test wrote
//! the same steps: the test [`alone`], a server sized for the connections
//! the attack holds, where its clients connect ([`Target`]), and the good
//! client's control window measured there before the attack; and the
//! counts the attacks read back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::MutexGuard;
use tokio::task::JoinHandle;

use crate::attack::{
    Bound, Control, alone, control_window, good_client, open_files_for, start_for_attack,
};
use crate::metrics::Metrics;
use crate::served::Served;
use crate::server::{Pki, Running};
use crate::wire::{Load, get, keep_alive_client};

/// Where an attack's clients connect: the server's admission address and
/// a TLS configuration that trusts its certificate (every client of these
/// tests takes both).
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub config: Arc<rustls::ClientConfig>,
}

impl Target {
    /// The admission port `addr` of a server that `pki` serves.
    pub fn new(addr: SocketAddr, pki: &Pki) -> Target {
        Target {
            addr,
            config: pki.client_config(),
        }
    }

    /// The binary's admission port.
    pub fn served(served: &Served) -> Target {
        Target::new(served.addr, &served.pki)
    }

    /// The good client's reviews with no attack running ([`control_window`]).
    pub async fn control_window(&self) -> Control {
        control_window(self.addr, &self.config).await
    }

    /// The good client's `n` reviews held to `p99` against `control`
    /// ([`good_client`]), while `during` goes on.
    pub async fn good_client(&self, (n, p99): (usize, Bound), during: &str, control: &Control) {
        good_client(self.addr, &self.config, (n, p99), during, control).await;
    }

    /// A client at full speed ([`keep_alive_client`]) sending `request`
    /// until the listener closes, each answer counted in `answered`.
    pub fn keep_alive(&self, request: Vec<u8>, answered: &Arc<AtomicUsize>) -> JoinHandle<Load> {
        let (addr, config) = (self.addr, self.config.clone());
        tokio::spawn(keep_alive_client(addr, config, request, answered.clone()))
    }
}

/// An attack on an in-process server, set up: the guard that keeps the
/// test [`alone`], the server, its PKI (kept: the server polls its files),
/// where its clients connect, and the good client's control window.
pub struct Attack {
    pub pki: Pki,
    pub server: Running,
    pub target: Target,
    pub control: Control,
    /// Last, so it is released after the rest is dropped.
    _alone: MutexGuard<'static, ()>,
}

impl Attack {
    /// This test alone, a server for an attack that holds up to `files`
    /// descriptors, tuned by `tune` ([`start_for_attack`]), and its control
    /// window.
    pub async fn start(
        files: u64,
        tune: impl FnOnce(&mut sandbox_webhook::server::Tuning),
    ) -> Attack {
        let alone = alone().await;
        let (pki, server) = start_for_attack(files, tune).await;
        let target = Target::new(server.addr, &pki);
        let control = target.control_window().await;
        Attack {
            pki,
            server,
            target,
            control,
            _alone: alone,
        }
    }

    /// The good client's `n` reviews held to `p99` against this attack's
    /// control window, while `during` goes on.
    pub async fn good_client(&self, bound: (usize, Bound), during: &str) {
        let control = &self.control;
        self.target.good_client(bound, during, control).await;
    }
}

/// This test alone, against the binary: `serve` started with `args`.
pub async fn served_alone(args: &[&str]) -> (MutexGuard<'static, ()>, Served) {
    let alone = alone().await;
    (alone, Served::start(args))
}

/// [`served_alone`] for an attack that holds up to `files` descriptors in
/// this process ([`open_files_for`]).
pub async fn served_holding(files: u64, args: &[&str]) -> (MutexGuard<'static, ()>, Served) {
    let alone = alone().await;
    open_files_for(files);
    (alone, Served::start(args))
}

/// A series of the server's metrics: its name and its exact labels.
pub type Series = (&'static str, &'static [(&'static str, &'static str)]);

/// The value of `series` on the binary's admin port.
pub fn metric(served: &Served, (name, labels): Series) -> u64 {
    let (_, text) = get(&served.admin.to_string(), "/metrics").expect("metrics");
    Metrics::parse(&text).value(name, labels)
}

/// How many connections the in-process `server` has evicted on
/// `listener` (`admission` or `admin`).
pub async fn evicted(server: &Running, listener: &str) -> u64 {
    let labels = [("listener", listener)];
    server
        .metric("sandbox_webhook_connections_evicted_total", &labels)
        .await
}
