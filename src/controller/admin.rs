//! The controller's plain-HTTP admin port: `/livez`, `/readyz`, `/metrics`,
//! the same routes as `serve`'s. It carries no traffic from users, so it
//! needs no limits beyond axum's defaults.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::metrics::ControllerMetrics;
use crate::admin::probes;

/// Ready once the controller has a client and takes part in the election;
/// a standby is ready too (it serves nothing, and must not be restarted).
pub(crate) use crate::admin::Readiness;

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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// `GET path` on a fresh connection: the status and the body.
    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        let (_, body) = out.split_once("\r\n\r\n").unwrap();
        (status, body.to_owned())
    }

    /// The value of the sample `series` (name and labels as exposed).
    fn sample(metrics: &str, series: &str) -> Option<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// The probes answer as `serve`'s do: alive at once, ready once the
    /// controller takes part in the election (a standby too), and the
    /// metrics with every series at 0 from the start.
    /// contract: controller.admin, controller.metrics
    #[tokio::test]
    async fn probes_and_every_series_from_the_start() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ready = Readiness::default();
        let metrics = Arc::new(ControllerMetrics::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(
            listener,
            ready.clone(),
            Arc::clone(&metrics),
            async {
                let _ = stopped.await;
            },
        ));

        assert_eq!(get(addr, "/livez").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503, "not in the election yet");
        ready.set(true);
        assert_eq!(get(addr, "/readyz").await.0, 200, "a standby is ready");
        assert_eq!(get(addr, "/nowhere").await.0, 404);

        let (status, text) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        let p = "sandbox_webhook_";
        let mut zero: Vec<String> = [
            "controller_leader",
            "platform_unschedulable_total",
            "controller_cached_pods",
            "controller_timers",
        ]
        .iter()
        .map(|m| format!("{p}{m}"))
        .collect();
        for action in ["deleted-pod", "deleted-owner", "left-owned"] {
            zero.push(format!("{p}expired_total{{action=\"{action}\"}}"));
        }
        for operation in [
            "delete-pod",
            "delete-owner",
            "get-pod",
            "patch-status",
            "create-event",
        ] {
            zero.push(format!(
                "{p}controller_api_errors_total{{operation=\"{operation}\"}}"
            ));
        }
        for series in &zero {
            assert_eq!(sample(&text, series), Some(0.0), "{series} in:\n{text}");
        }
        // Read at each scrape: this process has a resident size.
        let rss = sample(&text, &format!("{p}controller_resident_memory_bytes"));
        assert!(rss.is_some_and(|b| b > 0.0), "{text}");
        let limit = sample(&text, &format!("{p}controller_memory_limit_bytes"));
        assert!(limit.is_some_and(|b| b >= 0.0), "{text}");

        metrics.set_leader(true);
        metrics.api_error("get-pod");
        let (_, text) = get(addr, "/metrics").await;
        assert_eq!(sample(&text, &format!("{p}controller_leader")), Some(1.0));
        let get_pod = format!("{p}controller_api_errors_total{{operation=\"get-pod\"}}");
        assert_eq!(sample(&text, &get_pod), Some(1.0));

        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
    }
}
