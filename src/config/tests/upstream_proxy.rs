//! `egress.upstreamProxy`: its refusals never quote the URL or the credential.

use super::{err, ok};

/// No refusal of the upstream proxy quotes its URL or its credential, not
/// even a part of them, whatever is wrong with them; the accepted proxy is
/// read as written.
/// contract: config.upstream-proxy
#[test]
fn upstream_proxy_values_are_never_quoted() {
    const HOST: &str = "sentinel-host-7f3a.corp.example";
    const CREDENTIAL: &str = "c2VudGluZWwtY3JlZA";
    let section = |proxy: &str| format!("egress: {{mode: dns+nft, upstreamProxy: {proxy}}}");
    for proxy in [
        format!("{{url: '{HOST}:3128'}}"),
        format!("{{url: 'gopher://{HOST}:70'}}"),
        format!("{{url: 'http://user:{CREDENTIAL}@{HOST}:3128'}}"),
        format!("{{url: 'http://{HOST}:3128/{CREDENTIAL}'}}"),
        format!("{{url: 'http://{HOST}:3128?token={CREDENTIAL}'}}"),
        format!("{{url: 'http://{HOST}:3128#{CREDENTIAL}'}}"),
        format!("{{url: 'http://{HOST}:0'}}"),
        format!("{{url: 'http://{HOST}$:3128'}}"),
        format!("{{url: \"http://{HOST}\\n:3128\"}}"),
        format!("{{url: ['http://{HOST}:3128']}}"),
        format!("{{url: {{host: '{HOST}'}}}}"),
        format!("'http://{HOST}:3128'"),
        format!("['http://{HOST}:3128']"),
        format!("{{url: 'http://{HOST}:3128', authorization: \"Basic {CREDENTIAL}\\r\\n\"}}"),
        format!("{{url: 'http://{HOST}:3128', authorization: [{CREDENTIAL}]}}"),
        format!("{{url: 'http://{HOST}:3128', authorization: {{basic: {CREDENTIAL}}}}}"),
        format!(
            "{{url: 'http://{HOST}:3128', authorization: 'Basic {CREDENTIAL}', authorizationSecretRef: {{name: a, key: b}}}}"
        ),
    ] {
        let yaml = section(&proxy);
        let message = err(&yaml);
        assert!(
            !message.contains("sentinel") && !message.contains(CREDENTIAL),
            "{yaml}: {message}"
        );
        assert!(
            message.contains("egress.upstreamProxy"),
            "{yaml}: {message}"
        );
    }
    // Nor in mode dns, where the whole section is refused.
    let message = err(&format!(
        "egress: {{upstreamProxy: {{url: 'http://{HOST}:3128'}}}}"
    ));
    assert!(!message.contains("sentinel"), "{message}");

    let c = ok(&section(&format!(
        "{{url: 'http://{HOST}:3128', authorization: 'Basic {CREDENTIAL}', caSecretName: corp-ca}}"
    )));
    let proxy = c.egress.upstream_proxy.as_ref().unwrap();
    assert_eq!(proxy.url, format!("http://{HOST}:3128"));
    assert_eq!(
        proxy.authorization.as_deref(),
        Some(&*format!("Basic {CREDENTIAL}"))
    );
    assert!(!format!("{c:?}").contains("sentinel"));
}
