//! The real server's life on 127.0.0.1 port 0: readiness follows the TLS
//! listener, the configuration file is reloaded while it serves (a bad file
//! keeps the old configuration), and shutdown answers every request on its
//! way.

use common::attack::sandbox_review;
use common::https::{client, patch_of, post_review};
use common::server::{
    PATIENCE, Pki, RELOAD, Running, admin_get, assert_header, egress_review, eventually, post,
    read_response, replace, start_tuned, start_with_config, tls_connect,
};
use common::wire::{Load, Tls, keep_alive_client};
use sandbox_webhook::server::Server;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::server_support::{egress_review_request, half_sent_review, metric_reaches, start_fresh};

/// contract: config.reload
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reload_applies_good_files_and_keeps_the_old_on_bad_ones() {
    let yaml = "egress: {image: example.com/egress:v1}\n";
    let (pki, server, config_path) = start_with_config(yaml).await;
    let c = client(&pki);
    let url = server.url("/mutate");
    let egress_image = || async {
        let r = post_review(&c, &url, egress_review("uid-cfg", true)).await;
        assert_eq!(r.status(), 200);
        let patch = patch_of(&r.bytes().await.unwrap()).to_string();
        ["v1", "v2"]
            .into_iter()
            .find(|v| patch.contains(&format!("example.com/egress:{v}")))
            .expect("a known egress image")
    };
    assert_eq!(egress_image().await, "v1");

    replace(&config_path, b"egress: {image: example.com/egress:v2}\n");
    let latency = eventually("the new image is used", PATIENCE, || async {
        egress_image().await == "v2"
    })
    .await;
    eprintln!("observed config reload latency (poll every {RELOAD:?}): {latency:?}");
    let reloads = "sandbox_webhook_config_reloads_total";
    assert_eq!(server.metric(reloads, &[("result", "success")]).await, 1);

    let failure = [("result", "failure")];
    assert_eq!(server.metric(reloads, &failure).await, 0);
    replace(
        &config_path,
        b"egress: {image: example.com/egress:v3, color: blue}\n",
    );
    let what = "the broken file is counted";
    metric_reaches(&server, what, PATIENCE, reloads, &failure, 1).await;
    assert_eq!(egress_image().await, "v2");
    server.shutdown().await;
}

/// contract: http.readyz, http.admin
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_tls_listener() {
    let pki = Pki::new();
    let server = Server::bind(pki.settings()).await.unwrap();
    let admin = server.admin_addr();
    // Bound, admin answering, TLS not serving yet.
    assert_eq!(admin_get(admin, "/livez").await.0, 200);
    assert_eq!(admin_get(admin, "/readyz").await.0, 503);
    assert_eq!(admin_get(admin, "/nope").await.0, 404);

    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    eventually("ready", PATIENCE, || async {
        admin_get(admin, "/readyz").await.0 == 200
    })
    .await;
    assert_eq!(admin_get(admin, "/livez").await.0, 200);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// contract: http.drain
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_the_request_in_flight() {
    let (pki, mut server) = start_fresh().await;
    let (mut stream, rest) = half_sent_review(&server, &pki, "uid-drain").await;
    let in_flight = "sandbox_webhook_requests_in_flight";
    let what = "the request is in the handler";
    metric_reaches(&server, what, PATIENCE, in_flight, &[], 1).await;

    shut_down_until_unready(&mut server, "not ready while draining").await;
    eventually("no new connections", PATIENCE, || async {
        TcpStream::connect(server.addr).await.is_err()
    })
    .await;

    stream.write_all(&rest).await.unwrap();
    let response = read_response(&mut stream).await.expect("a response");
    assert_eq!(response.status, 200);
    assert_header(&response, "connection", "close");
    let review: Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(review["response"]["uid"], "uid-drain");
    assert_eq!(review["response"]["allowed"], true);
    stops_within_patience(server, "drained in time").await;
}

/// During the shutdown delay a keep-alive connection is closed by the
/// response to its next request (`Connection: close`), never between two
/// requests: the apiserver's Go client does not retry a POST that met EOF,
/// so an idle connection closed under it would lose a pod create.
/// contract: http.shutdown-delay
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_shutdown_delay_responses_close_their_connection() {
    let (pki, mut server) = start_tuned(|t| t.shutdown_delay = Duration::from_secs(2)).await;
    let mut stream = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let review = egress_review_request("uid-1");
    answered_keeping_alive(&mut stream, &review).await;

    shut_down_until_unready(&mut server, "not ready").await;
    // Still answered on the same connection, which then ends.
    stream.write_all(&review).await.unwrap();
    let second = read_response(&mut stream)
        .await
        .expect("a response in the delay");
    assert_eq!(second.status, 200);
    assert_header(&second, "connection", "close");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the connection stays open after Connection: close: {read:?} {rest:?}"
    );
    tokio::time::timeout(PATIENCE * 2, server.task)
        .await
        .expect("stops after the delay")
        .unwrap()
        .unwrap();
}

/// 32 keep-alive clients at full speed, then shutdown, five times (with a
/// shutdown delay, and without): every review written is answered. At the
/// end of the delay, connections that are handshaking, that wait for their
/// first request, or that sit between requests may each have a request on
/// its way; closing one under it loses a pod create.
/// contract: http.shutdown-delay, http.drain
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_review_is_lost_at_shutdown_under_full_load() {
    const CLIENTS: usize = 32;
    let mut total = Load::default();
    for run in 0..5 {
        let delay = Duration::from_millis(if run % 2 == 0 { 300 } else { 0 });
        let (pki, mut server) = start_tuned(|t| t.shutdown_delay = delay).await;
        let config = pki.client_config();
        let answered = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let uid = format!("run-{run}-client-{i}");
                let review = post("/mutate", "application/json", &sandbox_review(&uid));
                tokio::spawn(keep_alive_client(
                    server.addr,
                    config.clone(),
                    review,
                    answered.clone(),
                ))
            })
            .collect();
        eventually("every client at full speed", PATIENCE, || async {
            answered.load(Ordering::Relaxed) >= 4 * CLIENTS
        })
        .await;
        server.trigger_shutdown();
        stops_within_patience(server, "stops").await;
        let mut load = Load::default();
        for client in clients {
            load = load
                + tokio::time::timeout(PATIENCE, client)
                    .await
                    .expect("a client stops once refused")
                    .unwrap();
        }
        eprintln!("run {run} (shutdown delay {delay:?}): {load:?}");
        total = total + load;
    }
    assert_eq!(
        total.lost, 0,
        "reviews written and never answered: {total:?}"
    );
}

/// A keep-alive connection that sits idle between requests for
/// `--idle-timeout` is closed by the server, and not before: requests closer
/// together than that keep it open.
/// contract: limits.idle-timeout
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_secs(1);
    let (pki, server) = start_tuned(|t| t.idle_timeout = idle).await;
    let mut stream = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let review = egress_review_request("uid-idle");
    for i in 0..3 {
        if i > 0 {
            tokio::time::sleep(idle / 2).await;
        }
        answered_keeping_alive(&mut stream, &review).await;
    }
    let since = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut rest)).await;
    let closed_after = since.elapsed();
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "an idle connection is not closed within {PATIENCE:?}: {read:?} {rest:?}"
    );
    // The server's timer starts as it writes the answer, just before the
    // client has read it.
    assert!(
        closed_after >= idle * 4 / 5,
        "closed {closed_after:?} after the answer, before the idle timeout of {idle:?}"
    );
    server.shutdown().await;
}

/// Starts `server`'s shutdown and waits until `/readyz` says 503, failing
/// the test with `what` after [`PATIENCE`].
async fn shut_down_until_unready(server: &mut Running, what: &str) {
    server.trigger_shutdown();
    eventually(what, PATIENCE, || async {
        admin_get(server.admin, "/readyz").await.0 == 503
    })
    .await;
}

/// Waits for `server`'s task, already told to stop, to end cleanly within
/// [`PATIENCE`]; `what` names the wait in the failure.
async fn stops_within_patience(server: Running, what: &str) {
    tokio::time::timeout(PATIENCE, server.task)
        .await
        .expect(what)
        .unwrap()
        .unwrap();
}

/// Writes `review` on the keep-alive `stream` and reads its answer: 200,
/// with no `Connection` header, so the connection stays open.
async fn answered_keeping_alive(stream: &mut Tls, review: &[u8]) {
    stream.write_all(review).await.unwrap();
    let r = read_response(stream).await.expect("a response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), None, "{:?}", r.headers);
}
