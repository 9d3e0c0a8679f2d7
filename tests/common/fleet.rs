//! A fleet of sandbox pods as the apiserver sends them to the controller's
//! watch: `tests/fixtures/controller/running-sandbox.json` is one sandbox
//! mutated by the webhook, bound to a node and running, owned by a
//! `BatchSandbox`, with the labels, annotations, `managedFields` and status
//! a real cluster writes (11 KB, about what `kubectl get pod -o json
//! --show-managed-fields` prints for one). Each pod of the fleet fills in
//! its own name, namespace, UIDs, `resourceVersion`, expiry and addresses,
//! so nothing is shared by accident.

/// Namespaces the fleet is spread over.
pub const NAMESPACES: usize = 20;

const TEMPLATE: &str = include_str!("../fixtures/controller/running-sandbox.json");

/// A UUID made from `n` and `salt`, lowercase and hyphenated as the
/// apiserver writes UIDs; distinct for distinct `(n, salt)`.
#[must_use]
fn uuid(n: usize, salt: u16) -> String {
    let n = n as u64;
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        n.wrapping_mul(0x9e37_79b9) & 0xffff_ffff,
        salt,
        n >> 52 & 0xfff,
        n >> 40 & 0xfff,
        n & 0xff_ffff_ffff
    )
}

/// The template's own record: what an older configuration injected (its
/// images are older than the default configuration's, so the drift audit
/// finds it stale).
pub const STALE_RECORD: &str = r#"{"release":"0.1.0","config":"44136fa355b3678a","images":{"execd":"opensandbox/execd:v1.0.5"}}"#;

/// Sandbox pod `n` of the fleet, as the JSON of one watch event's object,
/// with `record` as its `<prefix>/injected` annotation, or without one (a
/// sandbox that escaped injection, its containers as built).
/// It expires `n` seconds after `first_expiry` (Unix seconds), so every
/// pod has its own expiry and timer.
#[must_use]
pub fn pod_json_with(n: usize, first_expiry: i64, record: Option<&str>) -> String {
    let id = uuid(n, 1);
    let sandbox = format!("sbx-{id}");
    let expires = chrono::DateTime::from_timestamp(first_expiry + i64::try_from(n).unwrap(), 0)
        .expect("a time in range")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let values = [
        ("{ID}", id.clone()),
        ("{SANDBOX}", sandbox),
        ("{NAMESPACE}", format!("team-{:02}", n % NAMESPACES)),
        ("{UID}", uuid(n, 3)),
        ("{OWNER_UID}", uuid(n, 2)),
        ("{RV}", format!("{}", 4_000_000 + n * 7)),
        ("{EXPIRES}", expires),
        (
            "{IP}",
            format!("10.{}.{}.{}", 64 + n / 65_536 % 64, n / 256 % 256, n % 256),
        ),
        ("{NODE}", format!("kwok-node-{}", n % 100)),
        ("{CID}", format!("{n:063x}")),
    ];
    let mut json = match record {
        Some(record) => TEMPLATE.replace(
            "\"{RECORD}\"",
            &serde_json::to_string(record).expect("a string"),
        ),
        None => TEMPLATE.replace("\"opensandbox.io/injected\": \"{RECORD}\",", ""),
    };
    for (placeholder, value) in values {
        json = json.replace(placeholder, &value);
    }
    json
}
