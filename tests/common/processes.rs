//! What the end-to-end suites start: the control plane of
//! `tests/e2e/cluster.sh` and daemons of the binary under test (a webhook, a
//! controller) that answer `/readyz` on an admin port. Each is stopped on
//! drop, whatever happened, and with this process if it is killed
//! ([`crate::children`]).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::children::{self, Janitor};
use crate::wire;

pub type Result<T, E = wire::Error> = std::result::Result<T, E>;

/// The `sandbox-webhook` binary cargo built beside the running test or
/// example. This crate is not the package whose binary it is, so cargo's
/// `CARGO_BIN_EXE_sandbox-webhook` is not set when it compiles; a test
/// binary runs from `target/PROFILE/deps/` and an example from
/// `target/PROFILE/examples/`, and the binary is in `target/PROFILE/`
/// (cargo builds it before any integration test).
pub fn bin_path() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the running executable's path");
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("run from target/PROFILE/deps or target/PROFILE/examples");
        profile
            .join(format!("sandbox-webhook{}", std::env::consts::EXE_SUFFIX))
            .to_str()
            .expect("a UTF-8 target path")
            .to_owned()
    })
}

/// The binary the daemons run: [`bin_path`], or the one
/// `SANDBOX_WEBHOOK_UNDER_TEST` names, to show that a test fails against
/// another build (an older commit's, say). Only daemons take it; the
/// suites' own tools keep [`bin_path`].
pub fn under_test() -> String {
    std::env::var("SANDBOX_WEBHOOK_UNDER_TEST")
        .ok()
        .filter(|bin| !bin.is_empty())
        .unwrap_or_else(|| bin_path().to_owned())
}

/// The repository's root (this crate is its `tests/common/`).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/common is two folders below the root")
}

/// `Err(what)` unless `cond`.
pub fn check(cond: bool, what: impl Into<String>) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(what.into().into())
    }
}

/// `Err` unless `said` (the JSON `diagnose` printed) holds `expected` at
/// `pointer` (a JSON pointer such as `/expiry/action`).
pub fn check_at(
    said: &serde_json::Value,
    pointer: &str,
    expected: impl Into<serde_json::Value>,
) -> Result<()> {
    let expected = expected.into();
    check(
        said.pointer(pointer) == Some(&expected),
        format!("diagnose: {pointer} is not {expected} in {said}"),
    )
}

/// A currently free port on 127.0.0.1 (the kernel picks it).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Which control plane a suite runs against.
#[derive(Clone, Copy, Debug)]
pub enum Plane {
    /// etcd and kube-apiserver only (`cluster.sh start --bare`), envtest-style:
    /// no scheduler, no controller-manager, no nodes.
    Bare,
    /// The whole product (`cluster.sh up`): every control-plane component,
    /// kwok nodes, the real node, this binary's webhook and controller on the
    /// host, and the chart's objects calling them.
    Up,
    /// Every control-plane component, kwok nodes and the real node (a
    /// kubelet with containerd, `cluster.sh start --node`), and nothing of
    /// the product: the suite installs it.
    Node,
}

/// The control plane; stopped on drop, by PID, or by its janitor when this
/// process is killed.
pub struct Cluster {
    dir: PathBuf,
    // Held, never read: dropping it (with this, or when the process dies)
    // runs `cluster.sh stop DIR`.
    _janitor: Janitor,
}

impl Cluster {
    pub fn start(dir: PathBuf, plane: Plane) -> Result<Self> {
        // Armed first: a test killed while the plane starts stops it too.
        let script = repo().join("tests/e2e/cluster.sh");
        let janitor = Janitor::arm(&[script.as_os_str(), "stop".as_ref(), dir.as_os_str()])?;
        let mut command = Command::new(repo().join("tests/e2e/cluster.sh"));
        match plane {
            Plane::Bare => command.args(["start", "--bare"]),
            Plane::Up => command.arg("up").env("SANDBOX_WEBHOOK", bin_path()),
            Plane::Node => command.args(["start", "--node"]),
        };
        let status = command.arg(&dir).stdout(Stdio::null()).status()?;
        // Constructed before the check so a half-started plane is stopped too.
        let cluster = Cluster {
            dir,
            _janitor: janitor,
        };
        check(
            status.success(),
            format!("cluster.sh {plane:?} failed: {status}"),
        )?;
        Ok(cluster)
    }

    /// Where the control plane keeps its state (`cluster.sh stop DIR`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// `cluster.env`: what `cluster.sh` started, where (`NAME=VALUE` lines).
    pub fn vars(&self) -> Result<Vars> {
        let text = std::fs::read_to_string(self.dir.join("cluster.env"))?;
        Ok(Vars(
            text.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ))
    }

    /// A client of the admin user.
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig())?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }
}

/// The variables of a `cluster.env`.
pub struct Vars(std::collections::HashMap<String, String>);

impl Vars {
    /// The value of `key`; an error naming it when `cluster.env` has none.
    pub fn get(&self, key: &str) -> Result<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("cluster.env has no {key}").into())
    }
}

/// `Err(exited(status))` once `child` has exited; `Ok` while it runs (or
/// was never started).
pub fn check_running(
    child: &mut Option<Child>,
    exited: impl FnOnce(ExitStatus) -> String,
) -> Result<()> {
    match child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
        Some(status) => Err(exited(status).into()),
        None => Ok(()),
    }
}

/// The arguments every daemon of the binary takes: `command` (`serve`,
/// `controller`), its configuration file, its admin address and the
/// release's namespace.
pub fn daemon_args(command: &str, config: &str, admin: &str, namespace: &str) -> Vec<String> {
    [
        command,
        "--config",
        config,
        "--admin-addr",
        admin,
        "--namespace",
        namespace,
    ]
    .map(String::from)
    .into()
}

/// [`daemon_args`] of a `serve` on `127.0.0.1:<port>` with the serving
/// certificate `tls.crt`/`tls.key` in `certs`.
pub fn serve_args(
    config: &str,
    certs: &Path,
    port: u16,
    admin: &str,
    namespace: &str,
) -> Vec<String> {
    let mut args = daemon_args("serve", config, admin, namespace);
    args.extend([
        "--tls-cert".to_owned(),
        certs.join("tls.crt").display().to_string(),
        "--tls-key".to_owned(),
        certs.join("tls.key").display().to_string(),
        "--addr".to_owned(),
        format!("127.0.0.1:{port}"),
    ]);
    args
}

/// One process of the binary under test with an admin port; killed on drop.
pub struct Daemon {
    /// What it is, for messages: `webhook`, `controller`.
    what: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Not started yet; `log` is appended to by every start.
    pub fn new(what: &str, log: PathBuf) -> Self {
        Daemon {
            what: what.to_owned(),
            child: None,
            log,
        }
    }

    /// Runs [`under_test`]` args...` (with `env`, output to the log) and waits up to
    /// `patience` until `/readyz` on `admin` answers 200; an error when the
    /// process exits first or never gets ready.
    pub fn start(
        &mut self,
        args: &[String],
        env: &[(&str, &Path)],
        admin: &str,
        patience: Duration,
    ) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new(under_test());
        command
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for (key, value) in env {
            command.env(key, value);
        }
        self.child = Some(children::spawn(command)?);
        let deadline = Instant::now() + patience;
        loop {
            check_running(&mut self.child, |status| {
                format!(
                    "{} exited at start: {status}; see {}",
                    self.what,
                    self.log.display()
                )
            })?;
            if wire::get(admin, "/readyz").is_ok_and(|(code, _)| code == 200) {
                return Ok(());
            }
            check(
                Instant::now() < deadline,
                format!("{} not ready within {patience:?}", self.what),
            )?;
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGKILL: the process dies without releasing anything.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait up to 20 s for the exit; the exit status.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let mut c = self.child.take().ok_or("not running")?;
        let pid = i32::try_from(c.id())?;
        // SAFETY: signalling a child process this test started and still owns.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = c.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                return Err(format!("{} did not exit within 20s of SIGTERM", self.what).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}
