//! Attacks on the server's limits, on loopback, each with a well-behaved
//! client that must still be answered within a second while the attack runs
//! (`well_behaved`). Each test fails without the bound it attacks.

use std::time::{Duration, Instant};

use common::https::{client_builder, try_post};
use common::pods::SandboxPod;
use common::server::{
    Pki, Running, admin_get, eventually, post, read_response, review_body, start_tuned,
    timed_review, tls_connect,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::server_support::{HANDSHAKE_FAILURES, metric_reaches};

const SECOND: Duration = Duration::from_secs(1);
const OPEN_CONNECTIONS: &str = "sandbox_webhook_open_connections";

fn sandbox_review(uid: &str) -> Vec<u8> {
    review_body(uid, &SandboxPod::new("sb-1").namespace("team-a").json())
}

/// Five reviews on fresh connections, each answered within a second.
async fn well_behaved(server: &Running, pki: &Pki, during: &str) {
    let config = pki.client_config();
    for i in 0..5 {
        let took = timed_review(
            server.addr,
            config.clone(),
            &sandbox_review(&format!("ok-{i}")),
        )
        .await
        .unwrap_or_else(|e| panic!("during {during}: a well-behaved review failed: {e}"));
        assert!(
            took < SECOND,
            "during {during}: a well-behaved review took {took:?}"
        );
    }
}

/// Stops the attackers' tasks.
fn abort_all<T>(tasks: &[tokio::task::JoinHandle<T>]) {
    for task in tasks {
        task.abort();
    }
}

async fn wait_open(server: &Running, listener: &str, at_least: u64) {
    let labels = [("listener", listener)];
    eventually("connections accepted", 10 * SECOND, || async {
        server.metric(OPEN_CONNECTIONS, &labels).await >= at_least
    })
    .await;
}

/// A server that admits `max` connections and gives each `head` to send its
/// first request head: the two bounds a connection flood meets.
async fn start_capped(max: u32, head: Duration) -> (Pki, Running) {
    start_tuned(|t| {
        t.max_connections = max;
        t.head_timeout = head;
    })
    .await
}

/// 200 raw TCP connections against a cap of 64: the longest idle are
/// evicted, and a good client is answered within a second.
/// contract: limits.max-connections, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_tcp_connections_that_never_start_tls_do_not_lock_out_clients() {
    // A head deadline long enough that it alone would not save the next client.
    let (pki, server) = start_capped(64, 10 * SECOND).await;

    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(server.addr).await.expect("connect"));
    }
    wait_open(&server, "admission", 64).await;
    well_behaved(&server, &pki, "a raw TCP flood").await;
    assert!(
        server
            .metric(
                "sandbox_webhook_connections_evicted_total",
                &[("listener", "admission")]
            )
            .await
            > 0
    );
    drop(idle);
    server.shutdown().await;
}

/// No handshake, or a head trickled a byte at a time: closed at the head
/// deadline, a stalled handshake counted as a timeout.
/// contract: limits.head-timeout
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_gets_a_deadline_for_handshake_and_first_head() {
    let (pki, server) = start_tuned(|t| t.head_timeout = SECOND).await;

    // No TLS at all: closed after the deadline, counted as a timeout.
    let started = Instant::now();
    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(5 * SECOND, raw.read(&mut buf))
        .await
        .expect("closed by the server");
    assert!(matches!(n, Ok(0) | Err(_)));
    assert!(started.elapsed() >= SECOND / 2, "{:?}", started.elapsed());
    let timeouts = [("reason", "timeout")];
    let what = "handshake timeout counted";
    metric_reaches(&server, what, 5 * SECOND, HANDSHAKE_FAILURES, &timeouts, 1).await;

    // TLS, then a head trickled a byte every 200 ms: cut at the deadline.
    let mut tls = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let started = Instant::now();
    let mut cut = None;
    for byte in b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
        .iter()
        .cycle()
    {
        if tls.write_all(&[*byte]).await.is_err() || tls.flush().await.is_err() {
            cut = Some(started.elapsed());
            break;
        }
        if started.elapsed() > 10 * SECOND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cut = cut.expect("a trickled head is cut off");
    assert!(cut < 4 * SECOND, "cut after {cut:?}");
    server.shutdown().await;
}

/// contract: limits.head-timeout, limits.max-connections, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_trickling_heads_do_not_lock_out_clients() {
    let (pki, server) = start_capped(32, 30 * SECOND).await;

    let config = pki.client_config();
    let mut tricklers = Vec::new();
    for _ in 0..48 {
        let mut tls = tls_connect(server.addr, config.clone()).await.unwrap();
        tricklers.push(tokio::spawn(async move {
            for byte in b"POST /mutate HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                if tls.write_all(&[*byte]).await.is_err() || tls.flush().await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    wait_open(&server, "admission", 32).await;
    well_behaved(&server, &pki, "trickled heads").await;
    abort_all(&tricklers);
    server.shutdown().await;
}

/// 32 stalled 7 MiB bodies: charged as they arrive, never past the budget,
/// and a good client is still answered.
/// contract: limits.body-budget, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_stay_within_the_budget() {
    const BODY: usize = 7 * 1024 * 1024;
    const BUDGET: u64 = 32 * 1024 * 1024;
    let (pki, server) = start_tuned(|t| {
        t.max_buffered_bytes = BUDGET;
        t.request_timeout = 30 * SECOND;
    })
    .await;

    let config = pki.client_config();
    let mut stalled = Vec::new();
    for _ in 0..32 {
        let config = config.clone();
        let addr = server.addr;
        stalled.push(tokio::spawn(async move {
            let mut tls = tls_connect(addr, config).await.unwrap();
            let head = format!(
                "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n"
            );
            tls.write_all(head.as_bytes()).await.unwrap();
            let chunk = vec![b' '; 64 * 1024];
            let mut sent = 0;
            // All but the last byte, then stall.
            while sent + chunk.len() < BODY {
                if tls.write_all(&chunk).await.is_err() {
                    return;
                }
                sent += chunk.len();
            }
            tokio::time::sleep(Duration::from_secs(60)).await;
        }));
    }
    // The attack fills what the budget allows and no more: the large pool
    // (three quarters of 32 MiB), charged as the bodies arrive.
    let buffered = "sandbox_webhook_request_body_buffered_bytes";
    eventually("bodies buffered", 20 * SECOND, || async {
        server.metric(buffered, &[]).await >= 3 * BODY as u64
    })
    .await;
    well_behaved(&server, &pki, "32 stalled 7 MiB bodies").await;
    let peak = server.metric(buffered, &[]).await;
    assert!(peak <= BUDGET, "{peak} bytes buffered, budget {BUDGET}");
    abort_all(&stalled);
    server.shutdown().await;
}

/// contract: limits.admin-connections, metrics.connections, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_admin_connections_do_not_lock_out_probes() {
    let (pki, server) = start_tuned(|t| t.admin_max_connections = 16).await;

    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(server.admin).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..5 {
        let started = Instant::now();
        let (status, _) = admin_get(server.admin, "/readyz").await;
        assert_eq!(status, 200);
        assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
    }
    let open = server
        .metric(OPEN_CONNECTIONS, &[("listener", "admin")])
        .await;
    assert!(open <= 17, "{open} admin connections open, cap 16");
    well_behaved(&server, &pki, "an admin flood").await;
    drop(idle);
    server.shutdown().await;
}

/// contract: limits.write-timeout, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_responses_is_cut_off() {
    let (pki, server) = start_tuned(|t| t.write_timeout = SECOND).await;

    let tls = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let (_reader, mut writer) = tokio::io::split(tls);
    let one = post("/mutate", "application/json", &sandbox_review("pipelined"));
    let writer = tokio::spawn(async move {
        // About 8 MB of answers, far beyond the socket buffers.
        for _ in 0..3000 {
            if writer.write_all(&one).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    wait_open(&server, "admission", 1).await;
    let labels = [("listener", "admission")];
    let what = "the non-reader is closed";
    let took = metric_reaches(&server, what, 20 * SECOND, OPEN_CONNECTIONS, &labels, 0).await;
    assert!(took < 15 * SECOND, "{took:?}");
    well_behaved(&server, &pki, "a non-reading pipeliner").await;
    writer.abort();
    server.shutdown().await;
}

/// The apiserver's view: a Go client does not retry a POST, so an answer
/// given before the body was read must say `Connection: close`.
/// contract: http.connection-close, limits.body-size
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_answers_say_connection_close() {
    let (pki, server) = start_tuned(|t| t.request_timeout = Duration::from_millis(300)).await;
    let config = pki.client_config();
    let body = sandbox_review("early");

    let huge = format!(
        "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{",
        8 * 1024 * 1024
    )
    .into_bytes();
    let stalled = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{".to_vec();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("415", post("/mutate", "text/plain", &body), 415),
        ("404", post("/nope", "application/json", &body), 404),
        (
            "405",
            {
                let mut r = post("/mutate", "application/json", &body);
                r.splice(0..5, b"PUT ".iter().copied());
                r
            },
            405,
        ),
        ("413", huge, 413),
        ("503", stalled, 503),
    ];
    for (what, request, status) in cases {
        let mut tls = tls_connect(server.addr, config.clone()).await.unwrap();
        tls.write_all(&request).await.unwrap();
        let response = read_response(&mut tls).await.expect(what);
        assert_eq!(response.status, status, "{what}");
        assert_eq!(response.header("connection"), Some("close"), "{what}");
    }
    // A full review keeps the connection.
    let mut tls = tls_connect(server.addr, config.clone()).await.unwrap();
    for _ in 0..3 {
        tls.write_all(&post("/mutate", "application/json", &body))
            .await
            .unwrap();
        let response = read_response(&mut tls).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.header("connection"), None);
    }

    // A keep-alive client, 50 times an early error then a review: no failure.
    let client = client_builder(&pki)
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let url = server.url("/mutate");
    let mut failures = Vec::new();
    for i in 0..50 {
        let early = try_post(&client, &url, "text/plain", body.clone()).await;
        if !matches!(&early, Ok(r) if r.status() == 415) {
            failures.push(format!("{i}: early {early:?}"));
        }
        let review = try_post(&client, &url, "application/json", body.clone()).await;
        if !matches!(&review, Ok(r) if r.status() == 200) {
            failures.push(format!("{i}: review {review:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    server.shutdown().await;
}

/// A head over 16 KiB, or of more than 100 headers, is answered 431 and its
/// connection closed; a head of 50 headers is read as usual.
/// contract: limits.head-size
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_head_is_answered_431_and_closed() {
    let (pki, server) = start_tuned(|_| {}).await;
    let body = sandbox_review("head");
    let with_headers = |extra: &str| {
        let request = post("/mutate", "application/json", &body);
        let at = request.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        [&request[..at], extra.as_bytes(), &request[at..]].concat()
    };
    let long = with_headers(&format!("X-Long: {}\r\n", "a".repeat(17 * 1024)));
    let headers = |n: usize| "X-N: v\r\n".repeat(n);
    let many = headers(101);
    for (what, request) in [
        ("a 17 KiB header", long),
        ("101 headers", with_headers(&many)),
    ] {
        let mut tls = tls_connect(server.addr, pki.client_config()).await.unwrap();
        tls.write_all(&request).await.unwrap();
        let response = read_response(&mut tls).await.expect(what);
        assert_eq!(response.status, 431, "{what}");
        let mut buf = [0u8; 1];
        let after = tokio::time::timeout(5 * SECOND, tls.read(&mut buf))
            .await
            .expect("the connection is closed");
        assert!(matches!(after, Ok(0) | Err(_)), "{what}: {after:?}");
    }
    let fifty = headers(50);
    let mut tls = tls_connect(server.addr, pki.client_config()).await.unwrap();
    tls.write_all(&with_headers(&fifty)).await.unwrap();
    assert_eq!(read_response(&mut tls).await.unwrap().status, 200);
    server.shutdown().await;
}

/// contract: http.shutdown-delay
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigterm_fresh_connections_are_answered_for_the_delay() {
    let (pki, mut server) = start_tuned(|t| t.shutdown_delay = 2 * SECOND).await;
    let config = pki.client_config();
    let (addr, admin) = (server.addr, server.admin);

    server.trigger_shutdown();
    let signalled = Instant::now();
    eventually("/readyz 503", SECOND, || async {
        admin_get(admin, "/readyz").await.0 == 503
    })
    .await;
    let mut answered = 0;
    while signalled.elapsed() < Duration::from_millis(1500) {
        timed_review(addr, config.clone(), &sandbox_review("draining"))
            .await
            .unwrap_or_else(|e| panic!("refused {:?} after SIGTERM: {e}", signalled.elapsed()));
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered >= 5, "{answered}");
    let result = tokio::time::timeout(20 * SECOND, server.task)
        .await
        .expect("stops after the delay")
        .expect("task");
    assert!(result.is_ok(), "{result:?}");
    assert!(
        signalled.elapsed() >= 2 * SECOND,
        "{:?}",
        signalled.elapsed()
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "listener closed at the end"
    );
}
