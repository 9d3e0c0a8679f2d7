//! `server_completed`, the recognition as one public function, on a pod's
//! text.

use serde_json::json;

use crate::config::Config;
use crate::mutate::inject::execd::INSTALL_SCRIPT;
use crate::mutate::{ServerCompleted, server_completed};

/// contract: coexist.recognised
#[test]
fn the_public_test_reads_a_pods_text() {
    let config = Config::default();
    let mut pod = json!({
        "metadata": {"labels": {"opensandbox.io/id": "x"}},
        "spec": {
            "initContainers": [{"name": "execd-installer", "image": "opensandbox/execd:v1.1.0",
                "command": ["/bin/sh", "-c"], "args": [INSTALL_SCRIPT],
                "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}]}],
            "containers": [{"name": "sandbox", "image": "python",
                "command": ["/opt/opensandbox/bootstrap.sh", "sh"]}]}});
    assert_eq!(
        server_completed(&pod.to_string(), &config),
        Some(ServerCompleted::Linux)
    );
    assert_eq!(server_completed("{", &config), None);
    pod["spec"]["initContainers"][0]["args"] = json!(["cp ./execd /x"]);
    assert_eq!(server_completed(&pod.to_string(), &config), None);
}
