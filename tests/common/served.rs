//! The binary under test serving on loopback, for the attacks whose
//! figure is the process's own (its resident memory, its log pipe), with
//! a sampler of its peak RSS.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::processes::{Daemon, free_port};
use crate::server::Pki;
pub use crate::wire::rss_kib;

/// `sandbox-webhook serve` on 127.0.0.1 with a fresh serving pair, killed
/// on drop.
pub struct Served {
    pub pki: Pki,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub daemon: Daemon,
}

impl Served {
    /// Starts the binary with `extra` flags after the addresses and files.
    pub fn start(extra: &[&str]) -> Served {
        let (pki, addr, admin, args) = Served::args(extra);
        let mut daemon = Daemon::new("webhook", pki.path("serve.log"));
        daemon
            .start(&args, &[], &admin.to_string(), Duration::from_secs(30))
            .expect("serve starts");
        Served {
            pki,
            addr,
            admin,
            daemon,
        }
    }

    /// A fresh serving pair, two free loopback ports, and the command line
    /// of `serve` on them with `extra` flags.
    pub fn args(extra: &[&str]) -> (Pki, SocketAddr, SocketAddr, Vec<String>) {
        let pki = Pki::new();
        let (_, files) = pki.write_leaf();
        let port = || -> SocketAddr {
            format!("127.0.0.1:{}", free_port().unwrap())
                .parse()
                .unwrap()
        };
        let (addr, admin) = (port(), port());
        let mut args: Vec<String> = ["serve", "--shutdown-delay", "0s"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.extend(["--addr".into(), addr.to_string()]);
        args.extend(["--admin-addr".into(), admin.to_string()]);
        args.extend(["--tls-cert".into(), path(&files.cert)]);
        args.extend(["--tls-key".into(), path(&files.key)]);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        (pki, addr, admin, args)
    }

    pub fn pid(&self) -> u32 {
        self.daemon.pid().expect("running")
    }

    /// Samples the process's resident memory every 20 ms until the
    /// returned sampler is stopped.
    pub fn sample_rss(&self) -> Rss {
        Rss::start(self.pid())
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The peak of a process's RSS while it is sampled.
pub struct Rss {
    pub before_kib: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rss {
    fn start(pid: u32) -> Rss {
        let before_kib = rss_kib(pid);
        let peak = Arc::new(AtomicU64::new(before_kib));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        Rss {
            before_kib,
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// The peak so far, in MiB.
    pub fn peak_mib(&self) -> u64 {
        self.peak.load(Ordering::Relaxed) / 1024
    }
}

impl Drop for Rss {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
