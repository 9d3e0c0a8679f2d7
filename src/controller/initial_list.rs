//! How the controller's watch fills its cache at start (and after a watch
//! expired): a paginated LIST, or the streaming list of KEP-3157
//! (`sendInitialEvents=true`), where the apiserver sends the objects as
//! watch events from its watch cache and ends them with a bookmark. The
//! stream holds one object at a time instead of a whole page and spares
//! etcd the LIST, which matters with tens of thousands of sandboxes.
//!
//! `auto` asks the apiserver: a streaming watch on a label no pod carries
//! must answer with the initial-events-end bookmark at once. A server with
//! the `WatchList` feature off refuses the request; one too old to know the
//! parameter ignores it and sends nothing. Either way it is the LIST.

use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, WatchEvent, WatchParams};

use crate::lifecycle::SandboxPod;

/// The flag's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum InitialList {
    /// The streaming list where the apiserver serves it, else a LIST.
    #[default]
    Auto,
    /// Always the streaming list (the watch fails where it is not served).
    Streaming,
    /// Always a paginated LIST, then a watch.
    List,
}

/// The probe's wait for the bookmark.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The annotation of the bookmark that ends the initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Whether the watch uses the streaming list: `Auto` decided by a probe.
pub async fn use_streaming(choice: InitialList, api: &Api<SandboxPod>) -> bool {
    match choice {
        InitialList::Streaming => true,
        InitialList::List => false,
        InitialList::Auto => probe(api, PROBE_TIMEOUT).await,
    }
}

async fn probe(api: &Api<SandboxPod>, wait: Duration) -> bool {
    let params = WatchParams::streaming_lists()
        .labels("sandbox-webhook.opensandbox.io/watch-list-probe")
        .timeout(u32::try_from(wait.as_secs().max(1)).unwrap_or(5));
    let first = tokio::time::timeout(wait, async {
        let stream = api.watch(&params, "0").await.ok()?;
        let mut stream = std::pin::pin!(stream);
        stream.next().await?.ok()
    })
    .await;
    match first {
        Ok(Some(WatchEvent::Bookmark(bookmark))) => bookmark
            .metadata
            .annotations
            .get(INITIAL_EVENTS_END)
            .is_some_and(|v| v == "true"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::Api;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::probe;

    /// An apiserver stand-in that answers every request with `response`
    /// (then keeps the connection open); the probe's verdict against it.
    async fn verdict(response: &'static str) -> bool {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream.write_all(response.as_bytes()).await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                });
            }
        });
        let config = kube::Config::new(url.parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        probe(&Api::all(client), Duration::from_secs(1)).await
    }

    /// `--initial-list auto` asks at start: the streaming list where the
    /// apiserver serves it, else a LIST.
    /// contract: controller.watch
    #[tokio::test]
    async fn the_initial_events_end_bookmark_means_streaming() {
        let body = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"42","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let response = Box::leak(
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}\n", body.len() + 1)
                .into_boxed_str(),
        );
        assert!(verdict(response).await);
    }

    #[tokio::test]
    async fn a_refusal_means_list() {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}"#;
        let response = Box::leak(
            format!("HTTP/1.1 422 Unprocessable Entity\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
                .into_boxed_str(),
        );
        assert!(!verdict(response).await);
    }

    #[tokio::test]
    async fn silence_means_list() {
        // A server too old to know sendInitialEvents starts a plain watch
        // and, with no matching pod, sends nothing.
        let response = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(!verdict(response).await);
    }
}
