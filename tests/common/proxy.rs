//! One address in front of several webhook processes, as a Service and
//! kube-proxy put one in front of a Deployment's pods: a TCP proxy on
//! 127.0.0.1 that sends each new connection to the next backend whose
//! `/readyz` answered 200 at the last probe (every 50 ms, as endpoints
//! follow readiness), and leaves established connections where they are, as
//! conntrack does. TLS passes through untouched.
//!
//! It runs on its own thread and runtime, as kube-proxy is its own process:
//! on the test's runtime, the load it generates (hundreds of creates a
//! second through a debug-built client) would starve the copying and stall
//! TLS handshakes past the webhook's deadline, which a real Service never
//! does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::processes::Result;
use crate::wire;

/// A backend: where it serves and where it answers `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    pub addr: SocketAddr,
    pub admin: String,
}

#[derive(Default)]
struct State {
    backends: Vec<Backend>,
    ready: Vec<SocketAddr>,
}

pub struct Proxy {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Connections refused because no backend was ready.
    refused: Arc<AtomicUsize>,
    /// Dropped (or sent) to stop the proxy's thread.
    stop: Option<oneshot::Sender<()>>,
}

impl Proxy {
    pub fn start() -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let refused = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (state_, refused_) = (Arc::clone(&state), Arc::clone(&refused));
        std::thread::Builder::new()
            .name("proxy".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept_loop(listener, Arc::clone(&state_), refused_) => {}
                        () = probe_loop(state_) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Proxy {
            addr,
            state,
            refused,
            stop: Some(stop),
        })
    }

    /// Adds a backend; it receives connections once its `/readyz` says so.
    pub fn add(&self, backend: Backend) {
        lock(&self.state).backends.push(backend);
    }

    /// Removes a backend (its pod is gone from the endpoints for good).
    pub fn remove(&self, addr: SocketAddr) {
        let mut state = lock(&self.state);
        state.backends.retain(|b| b.addr != addr);
        state.ready.retain(|a| *a != addr);
    }

    /// Backends ready at the last probe.
    pub fn ready(&self) -> Vec<SocketAddr> {
        lock(&self.state).ready.clone()
    }

    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>, refused: Arc<AtomicUsize>) {
    let next = AtomicUsize::new(0);
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        let target = {
            let state = lock(&state);
            (!state.ready.is_empty())
                .then(|| state.ready[next.fetch_add(1, Ordering::Relaxed) % state.ready.len()])
        };
        let Some(target) = target else {
            refused.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut upstream) = TcpStream::connect(target).await {
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                // Either side's close (or reset) is passed on to the other.
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}

async fn probe_loop(state: Arc<Mutex<State>>) {
    loop {
        let backends = lock(&state).backends.clone();
        let mut ready = Vec::new();
        for b in backends {
            let admin = b.admin.clone();
            let ok = tokio::task::spawn_blocking(move || {
                wire::get(&admin, "/readyz").is_ok_and(|(code, _)| code == 200)
            })
            .await
            .unwrap_or(false);
            if ok {
                ready.push(b.addr);
            }
        }
        lock(&state).ready = ready;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
