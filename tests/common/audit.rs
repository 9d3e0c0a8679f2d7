//! The apiserver's audit log (`cluster.sh` starts every plane with an audit
//! policy at `Metadata` for pod creates, workload writes and Lease writes):
//! the events of one object, and the annotations the admission webhooks
//! added to them (contract: audit.log).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::cluster::wait_for_one;
use crate::processes::Result;

/// One audit event of a create, as the log has it (stage
/// `ResponseComplete`).
#[derive(Debug, Clone)]
pub struct Audited {
    pub annotations: BTreeMap<String, String>,
    /// The status code the apiserver answered.
    pub code: u64,
}

impl Audited {
    /// The annotations under `<prefix>/` (a webhook's name), by key.
    pub fn under(&self, prefix: &str) -> BTreeMap<&str, &str> {
        self.annotations
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(prefix)
                    .and_then(|k| k.strip_prefix('/'))
                    .map(|k| (k, v.as_str()))
            })
            .collect()
    }
}

/// The `ResponseComplete` events of the `verb` of `resource` `name` in
/// `namespace` (dry runs too), in the log's order.
pub fn events(
    log: &Path,
    resource: &str,
    verb: &str,
    namespace: &str,
    name: &str,
) -> Result<Vec<Audited>> {
    let text = std::fs::read_to_string(log)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let object = &event["objectRef"];
        if event["stage"] == "ResponseComplete"
            && event["verb"] == verb
            && object["resource"] == resource
            && object["namespace"] == namespace
            && object["name"] == name
            && object["subresource"].is_null()
        {
            let annotations = event["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect();
            let code = event["responseStatus"]["code"].as_u64().unwrap_or(0);
            out.push(Audited { annotations, code });
        }
    }
    Ok(out)
}

/// The one create event of pod `namespace/name`, waiting up to 10 s for
/// the log to have it.
pub async fn pod_create(log: &Path, namespace: &str, name: &str) -> Result<Audited> {
    wait_for_one(
        &format!(
            "create events of pod {namespace}/{name} in {}",
            log.display()
        ),
        Duration::from_secs(10),
        async || events(log, "pods", "create", namespace, name),
    )
    .await
}
