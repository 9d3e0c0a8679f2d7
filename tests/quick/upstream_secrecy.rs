//! contract: config.upstream-proxy, egress.upstream-proxy-pod
//!
//! The upstream proxy's URL may name internal infrastructure and its
//! credential is one: no error and no log line quotes either. `serve`
//! starts with them, denies the pods the proxy refuses, and reloads broken
//! files that hold them; every line it wrote is read back. `config
//! validate` and a start-up on a broken file print neither.

use common::cli::{run, temp_file};
use common::https::client;
use common::metrics::Metrics;
use common::served::Served;
use common::server::{PATIENCE, admin_get, eventually, replace};
use serde_json::{Value, json};

use crate::server_support::post_create;

const HOST: &str = "sentinel-7f3a.corp.example";
const CREDENTIAL: &str = "c2VudGluZWwtY3JlZGVudGlhbA";

fn config(proxy: &str) -> String {
    format!("egress: {{mode: dns+nft, upstreamProxy: {proxy}}}\n")
}

/// Broken configurations that each hold the URL or the credential.
fn broken() -> Vec<String> {
    vec![
        config(&format!("{{url: 'http://user:{CREDENTIAL}@{HOST}:3128'}}")),
        config(&format!("{{url: 'http://{HOST}:3128/{CREDENTIAL}'}}")),
        config(&format!("{{url: 'http://{HOST}:3128?key={CREDENTIAL}'}}")),
        config(&format!("{{url: '{HOST}:3128'}}")),
        config(&format!("{{url: 'http://{HOST}:99999'}}")),
        config(&format!("'http://{HOST}:3128'")),
        config(&format!(
            "{{url: 'http://{HOST}:3128', authorization: \"Basic {CREDENTIAL}\\n\"}}"
        )),
        config(&format!(
            "{{url: 'http://{HOST}:3128', authorization: 'Basic {CREDENTIAL}', authorizationSecretRef: {{name: a, key: b}}}}"
        )),
        format!(
            "egress: {{upstreamProxy: {{url: 'http://{HOST}:3128', authorization: 'Basic {CREDENTIAL}'}}}}\n"
        ),
    ]
}

fn quoted(text: &str) -> bool {
    text.contains(HOST) || text.contains(CREDENTIAL) || text.contains("sentinel")
}

fn policy_pod(annotations: &Value) -> Value {
    let mut metadata = json!({"name": "proxied", "labels": {"opensandbox.io/id": "proxied"},
        "annotations": {"opensandbox.io/network-policy": "{\"defaultAction\":\"deny\"}"}});
    for (k, v) in annotations.as_object().unwrap() {
        metadata["annotations"][format!("opensandbox.io/{k}")] = v.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [{"name": "sandbox", "image": "busybox", "command": ["sleep", "1"]}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_proxy_is_quoted_by_no_error_and_no_log_line() {
    let good = config(&format!(
        "{{url: 'http://{HOST}:3128', authorization: 'Basic {CREDENTIAL}'}}"
    ));
    let (dir, file) = temp_file("config.yaml", &good);
    let path_arg = file.display().to_string();
    let mut served = Served::start(&[
        "--log-format",
        "json",
        "--config",
        &path_arg,
        "--reload-interval",
        "100ms",
    ]);
    let c = client(&served.pki);
    let url = format!("https://127.0.0.1:{}/mutate", served.addr.port());

    // The proxy is in the sidecar of an admitted pod: the sentinel is real.
    let admitted = policy_pod(&json!({"credential-proxy": "true"}));
    let r = post_create(&c, &url, "ok", &admitted).await;
    let body = r.text().await.unwrap();
    let patch = sandbox_webhook::review::decoded(body.as_bytes()).unwrap();
    assert!(patch.to_string().contains(HOST), "{patch}");
    // The pods the proxy refuses: each denial names the field, never the URL.
    for (uid, annotations, says) in [
        (
            "dns",
            json!({"egress-env": "{\"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT\":\"true\"}", "egress-mode": "dns"}),
            "dns+nft",
        ),
        (
            "insecure",
            json!({"egress-env": "{\"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT\":\"1\",\"OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE\":\"on\"}"}),
            "SSL_INSECURE",
        ),
        ("opaque", json!({}), "transparent"),
    ] {
        let pod = policy_pod(&annotations);
        let r = post_create(&c, &url, uid, &pod).await;
        let answer: Value = r.json().await.unwrap();
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert_eq!(answer["response"]["allowed"], false, "{uid}: {answer}");
        assert!(
            message.contains(says) && message.contains("egress.upstreamProxy"),
            "{message}"
        );
        assert!(!quoted(message), "{message}");
    }

    // Each broken file is refused at reload, and logged.
    let failures = |text: &str| {
        Metrics::parse(text).value(
            "sandbox_webhook_config_reloads_total",
            &[("result", "failure")],
        )
    };
    for (n, text) in broken().iter().enumerate() {
        replace(&file, text.as_bytes());
        eventually("the broken file is refused", PATIENCE, || async {
            failures(&admin_get(served.admin, "/metrics").await.1) == n as u64 + 1
        })
        .await;
    }
    served.daemon.terminate().unwrap();
    let log = std::fs::read_to_string(served.pki.path("serve.log")).unwrap();
    let rejected = log
        .lines()
        .filter(|l| l.contains("reload rejected"))
        .count();
    assert_eq!(rejected, broken().len(), "{log}");
    assert!(log.contains("egress.upstreamProxy"), "{log}");
    let denials = log.lines().filter(|l| l.contains("\"denied\"")).count();
    assert_eq!(denials, 3, "{log}");
    for line in log.lines() {
        assert!(!quoted(line), "a log line quotes the proxy: {line}");
    }

    // The same files, checked offline and at start-up.
    for text in broken() {
        std::fs::write(&file, &text).unwrap();
        let checked = run(&["config", "validate", &path_arg], dir.path());
        assert_eq!(checked.code, 1, "{text}: {}", checked.stderr);
        let (_pki, _, _, args) = Served::args(&["--config", &path_arg]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = run(&args, dir.path());
        assert_eq!(started.code, 2, "{text}: {}", started.stderr);
        for out in [
            &checked.stdout,
            &checked.stderr,
            &started.stdout,
            &started.stderr,
        ] {
            assert!(out.is_empty() || out.contains("egress"), "{out}");
            assert!(!quoted(out), "{text}: {out}");
        }
    }
}
