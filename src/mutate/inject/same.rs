//! Whether a container or volume the pod holds under one of the webhook's
//! names is exactly what the webhook injects now (verify, don't trust,
//! what looks injected).
//!
//! "Exactly" is field by field, every field: one the webhook does not set
//! (`command`, `envFrom`, `lifecycle`, an extra mount or env var) is as
//! much a difference as a wrong image or stale rules, since each could run
//! other code in a container that holds `NET_ADMIN`, or feed the sidecar
//! other rules. The only differences forgiven are what the apiserver adds
//! by itself to every container between two admissions (a second pass sees
//! the pod as decoded and defaulted), so that the webhook's own output
//! admitted again still needs no patch:
//! - `terminationMessagePath: /dev/termination-log`,
//!   `terminationMessagePolicy: File`, any `imagePullPolicy` (defaulted from
//!   the image's tag; none changes which image runs);
//! - `protocol: TCP` on a port; `timeoutSeconds: 1`, `successThreshold: 1`
//!   and `httpGet.scheme: HTTP` on the readiness and startup probes;
//! - `resources`: anything when the configuration sets none (the apiserver
//!   writes `{}`, a `LimitRange` fills in its defaults); otherwise every
//!   quantity the configuration sets, compared as a quantity (the apiserver
//!   writes `1500m` for `1.5`), with more allowed beside them (requests
//!   defaulted from limits, `LimitRange` defaults);
//! - the service-account token mount the apiserver adds to every container
//!   of a pod that mounts the token (`kube-api-access-*` at
//!   `/var/run/secrets/kubernetes.io/serviceaccount`, read-only).

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::config::Quantity;

/// Where a held container first differs from the webhook's: the field
/// named in the warning that says it was replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference(pub String);

/// Checks `present` (a container as the pod has it) against `expected`
/// (the container the webhook injects now).
pub(crate) fn container<T: Serialize + ?Sized>(
    present: &RawValue,
    expected: &T,
) -> Result<(), Difference> {
    let whole = || Difference("the whole container".to_owned());
    let Ok(Value::Object(mut present)) = serde_json::from_str::<Value>(present.get()) else {
        return Err(whole());
    };
    let Ok(Value::Object(expected)) = serde_json::to_value(expected) else {
        return Err(whole());
    };
    forgive_defaults(&mut present, &expected);
    first_difference(&present, &expected).map_or(Ok(()), Err)
}

/// Checks `present` (a volume as the pod has it) against `expected`. The
/// apiserver's one default on the volumes the webhook injects is forgiven:
/// `defaultMode: 420` (0644) on a Secret volume.
pub(crate) fn volume<T: Serialize + ?Sized>(present: &RawValue, expected: &T) -> bool {
    let mut present = serde_json::from_str::<Value>(present.get()).ok();
    let expected = serde_json::to_value(expected).ok();
    let sets_mode = expected
        .as_ref()
        .and_then(|e| e.pointer("/secret/defaultMode"))
        .is_some();
    if let Some(Value::Object(secret)) = present.as_mut().and_then(|p| p.get_mut("secret"))
        && !sets_mode
    {
        drop_if(secret, "defaultMode", &Value::from(420));
    }
    present.is_some() && present == expected
}

/// The first key, in `present`'s order then `expected`'s, whose values
/// differ or that only one of them has.
fn first_difference(
    present: &Map<String, Value>,
    expected: &Map<String, Value>,
) -> Option<Difference> {
    present
        .iter()
        .find(|(k, v)| expected.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .or_else(|| expected.keys().find(|k| !present.contains_key(*k)))
        .map(|k| Difference(k.clone()))
}

/// What the service-account admission plugin mounts into every container.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// Takes out of `present` what the apiserver adds by itself (see the
/// module's comment), where `expected` does not set it otherwise.
fn forgive_defaults(present: &mut Map<String, Value>, expected: &Map<String, Value>) {
    for (key, default) in [
        ("terminationMessagePath", "/dev/termination-log"),
        ("terminationMessagePolicy", "File"),
    ] {
        if !expected.contains_key(key) && present.get(key).and_then(Value::as_str) == Some(default)
        {
            present.remove(key);
        }
    }
    if !expected.contains_key("imagePullPolicy")
        && present.get("imagePullPolicy").is_some_and(Value::is_string)
    {
        present.remove("imagePullPolicy");
    }
    match (present.get("resources"), expected.get("resources")) {
        (Some(_), None) => {
            present.remove("resources");
        }
        (Some(have), Some(want)) if covers(have, want) => {
            present.insert("resources".to_owned(), want.clone());
        }
        _ => {}
    }
    if let Some(Value::Array(ports)) = present.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            drop_if(port, "protocol", &Value::from("TCP"));
        }
    }
    for name in ["readinessProbe", "startupProbe"] {
        if let Some(Value::Object(probe)) = present.get_mut(name) {
            drop_if(probe, "timeoutSeconds", &Value::from(1));
            drop_if(probe, "successThreshold", &Value::from(1));
            if let Some(Value::Object(get)) = probe.get_mut("httpGet") {
                drop_if(get, "scheme", &Value::from("HTTP"));
            }
        }
    }
    if let Some(Value::Array(mounts)) = present.get_mut("volumeMounts") {
        mounts.retain(|m| !is_token_mount(m));
        if mounts.is_empty() && !expected.contains_key("volumeMounts") {
            present.remove("volumeMounts");
        }
    }
}

fn drop_if(map: &mut Map<String, Value>, key: &str, default: &Value) {
    if map.get(key) == Some(default) {
        map.remove(key);
    }
}

fn is_token_mount(mount: &Value) -> bool {
    let text = |k: &str| mount.get(k).and_then(Value::as_str);
    mount.as_object().is_some_and(|m| m.len() == 3)
        && text("mountPath") == Some(TOKEN_MOUNT_PATH)
        && text("name").is_some_and(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        && mount.get("readOnly") == Some(&Value::Bool(true))
}

/// Whether resources `have` hold every quantity of `want` (the
/// configuration's), each equal as a quantity.
fn covers(have: &Value, want: &Value) -> bool {
    let Some(want) = want.as_object() else {
        return false;
    };
    want.iter().all(|(section, names)| {
        names.as_object().is_some_and(|names| {
            names.iter().all(|(name, q)| {
                let got = have.get(section).and_then(|s| s.get(name));
                match (got.and_then(quantity), quantity(q)) {
                    (Some(a), Some(b)) => a == b,
                    _ => false,
                }
            })
        })
    })
}

fn quantity(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(present: &Value, expected: &Value) -> Result<(), Difference> {
        let raw = RawValue::from_string(present.to_string()).unwrap();
        container(&raw, expected)
    }

    fn sidecar() -> Value {
        json!({
            "name": "egress",
            "image": "opensandbox/egress:v1",
            "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}],
            "ports": [{"name": "egress-api", "containerPort": 18080}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 18080}, "periodSeconds": 1},
            "startupProbe": {"httpGet": {"path": "/healthz", "port": 18080}, "periodSeconds": 1},
            "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}],
            "restartPolicy": "Always",
        })
    }

    /// The sidecar as the apiserver hands it back on a second pass.
    fn defaulted() -> Value {
        let mut c = sidecar();
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["terminationMessagePolicy"] = json!("File");
        c["imagePullPolicy"] = json!("IfNotPresent");
        c["resources"] = json!({});
        c["ports"][0]["protocol"] = json!("TCP");
        for probe in ["readinessProbe", "startupProbe"] {
            c[probe]["timeoutSeconds"] = json!(1);
            c[probe]["successThreshold"] = json!(1);
            c[probe]["httpGet"]["scheme"] = json!("HTTP");
        }
        c["volumeMounts"].as_array_mut().unwrap().push(json!({
            "name": "kube-api-access-x7k2p", "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"
        }));
        c
    }

    #[test]
    fn what_the_apiserver_adds_is_forgiven() {
        assert_eq!(check(&sidecar(), &sidecar()), Ok(()));
        assert_eq!(check(&defaulted(), &sidecar()), Ok(()));
        // Key order does not matter.
        let reordered: Value = serde_json::from_str(
            r#"{"restartPolicy":"Always","name":"egress","image":"opensandbox/egress:v1",
            "env":[{"value":"{}","name":"OPENSANDBOX_EGRESS_RULES"}],
            "ports":[{"containerPort":18080,"name":"egress-api"}],
            "readinessProbe":{"periodSeconds":1,"httpGet":{"port":18080,"path":"/healthz"}},
            "startupProbe":{"periodSeconds":1,"httpGet":{"port":18080,"path":"/healthz"}},
            "volumeMounts":[{"mountPath":"/opt/opensandbox","name":"opensandbox-bin"}]}"#,
        )
        .unwrap();
        assert_eq!(check(&reordered, &sidecar()), Ok(()));
    }

    #[test]
    fn anything_else_is_a_difference_named_by_its_field() {
        let differs = |change: &dyn Fn(&mut Value), field: &str| {
            let mut c = defaulted();
            change(&mut c);
            assert_eq!(
                check(&c, &sidecar()),
                Err(Difference(field.to_owned())),
                "{c}"
            );
        };
        differs(&|c| c["image"] = json!("busybox"), "image");
        differs(
            &|c| c["env"][0]["value"] = json!(r#"{"defaultAction":"allow"}"#),
            "env",
        );
        differs(
            &|c| {
                c["env"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "OPENSANDBOX_EGRESS_POLICY_FILE", "value": "/x"}));
            },
            "env",
        );
        differs(
            &|c| c["command"] = json!(["sh", "-c", "iptables -F"]),
            "command",
        );
        differs(
            &|c| c["envFrom"] = json!([{"configMapRef": {"name": "x"}}]),
            "envFrom",
        );
        differs(
            &|c| c["lifecycle"] = json!({"postStart": {"exec": {"command": ["sh"]}}}),
            "lifecycle",
        );
        differs(
            &|c| c["securityContext"] = json!({"privileged": true}),
            "securityContext",
        );
        differs(
            &|c| {
                c["volumeMounts"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "evil", "mountPath": "/usr/bin"}));
            },
            "volumeMounts",
        );
        // A token mount that is not the apiserver's.
        differs(
            &|c| c["volumeMounts"][1]["readOnly"] = json!(false),
            "volumeMounts",
        );
        differs(&|c| c["ports"][0]["protocol"] = json!("UDP"), "ports");
        differs(
            &|c| c["terminationMessagePath"] = json!("/etc/x"),
            "terminationMessagePath",
        );
        differs(
            &|c| {
                c.as_object_mut().unwrap().remove("restartPolicy");
            },
            "restartPolicy",
        );
        let whole = RawValue::from_string("[1]".to_owned()).unwrap();
        assert!(container(&whole, &sidecar()).is_err());
    }

    #[test]
    fn resources_are_compared_as_quantities_when_configured() {
        let mut want = sidecar();
        want["resources"] = json!({"limits": {"cpu": "1.5", "memory": "1Gi"}});
        let mut have = defaulted();
        have["resources"] = json!({
            "limits": {"cpu": "1500m", "memory": "1Gi"},
            "requests": {"cpu": "1500m", "memory": "1Gi", "ephemeral-storage": "1Gi"},
        });
        assert_eq!(check(&have, &want), Ok(()));
        have["resources"]["limits"]["cpu"] = json!("2");
        assert_eq!(check(&have, &want), Err(Difference("resources".to_owned())));
        have["resources"] = json!({});
        assert!(check(&have, &want).is_err());
        // None configured: whatever is there is left to the platform.
        let mut any = defaulted();
        any["resources"] = json!({"limits": {"memory": "1Mi"}});
        assert_eq!(check(&any, &sidecar()), Ok(()));
    }

    #[test]
    fn volumes_must_be_equal() {
        let ours = json!({"name": "opensandbox-bin", "emptyDir": {}});
        let raw = |v: Value| RawValue::from_string(v.to_string()).unwrap();
        assert!(volume(
            &raw(json!({"emptyDir": {}, "name": "opensandbox-bin"})),
            &ours
        ));
        assert!(!volume(
            &raw(json!({"name": "opensandbox-bin", "emptyDir": {"medium": "Memory"}})),
            &ours
        ));
        let ca = json!({"name": "ca", "secret": {"secretName": "corp-ca"}});
        let defaulted =
            json!({"name": "ca", "secret": {"secretName": "corp-ca", "defaultMode": 420}});
        assert!(volume(&raw(defaulted), &ca));
        let other = json!({"name": "ca", "secret": {"secretName": "corp-ca", "defaultMode": 511}});
        assert!(!volume(&raw(other), &ca));
    }
}
