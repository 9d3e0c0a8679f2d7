//! Item 9 of issue 41: the guarantee after admission, through UPDATE
//! reviews of the pod and of its ephemeral containers.

use super::*;

/// An UPDATE review of `new` over `old` (`sub` the subresource).
fn update(old: &Value, new: &Value, sub: Option<&str>) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&common::reviews::review(
        "u-upd",
        "team-a",
        "UPDATE",
        new,
        Some(old),
    ))
    .unwrap();
    if let Some(sub) = sub {
        review["request"]["subResource"] = json!(sub);
    }
    serde_json::to_vec(&review).unwrap()
}

/// The subresource `kubectl debug` updates.
const EPHEMERAL: &str = "ephemeralcontainers";

/// The answer to an UPDATE of `old`'s `ephemeralcontainers` subresource
/// to `new`: what `kubectl debug` sends.
async fn ephemeral_update(server: &PolicyServer, old: &Value, new: &Value) -> (Value, Vec<u8>) {
    server.answer_to(update(old, new, Some(EPHEMERAL))).await
}

/// The message of the server's denial of an UPDATE of `old` to `new`
/// (`sub` the subresource); fails if it is allowed.
async fn update_denied(
    server: &PolicyServer,
    old: &Value,
    new: &Value,
    sub: Option<&str>,
) -> String {
    let (response, _) = server.answer_to(update(old, new, sub)).await;
    assert_eq!(response["allowed"], false, "{new}: {response}");
    response["status"]["message"].as_str().unwrap().to_owned()
}

/// Item 9: the guarantee holds after admission. The webhook's containers
/// keep their images; an ephemeral container beside a policy is held to
/// the rules of any other container and loses NET_RAW and NET_ADMIN.
/// contract: select.pod-update, egress.update-images, egress.ephemeral
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guarantee_holds_after_admission() {
    let server = PolicyServer::start().await;
    let stored = admitted(&server, &policy_pod("later").json()).await;

    let mut swapped = stored.clone();
    swapped["spec"]["initContainers"][1]["image"] = json!("attacker/egress:latest");
    let message = update_denied(&server, &stored, &swapped, None).await;
    assert!(
        message.contains("init container 'egress'") && message.contains("attacker/egress:latest"),
        "{message}"
    );
    let mut installer = stored.clone();
    installer["spec"]["initContainers"][0]["image"] = json!("attacker/execd");
    update_denied(&server, &stored, &installer, None).await;
    // The sandbox's own image may change; so may labels. Nothing to patch.
    let mut main = stored.clone();
    main["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    main["metadata"]["labels"]["team"] = json!("a");
    let (response, _) = server.answer_to(update(&stored, &main, None)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");

    let debug = |sc: Value, target: Option<&str>| {
        let mut new = stored.clone();
        let mut e = json!({"name": "debugger", "image": "busybox", "stdin": true});
        if !sc.is_null() {
            e["securityContext"] = sc;
        }
        if let Some(t) = target {
            e["targetContainerName"] = json!(t);
        }
        new["spec"]["ephemeralContainers"] = json!([e]);
        new
    };
    for (sc, target, says) in [
        (json!({"privileged": true}), None, "is privileged"),
        (
            json!({"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}),
            None,
            "NET_ADMIN",
        ),
        (
            json!({"capabilities": {"add": ["net_r\u{430}w", "cap_net_raw"]}}),
            None,
            "NET_RAW",
        ),
        (
            json!({"capabilities": {"add": ["SYS_PTRACE"]}}),
            Some("egress"),
            "targetContainerName",
        ),
    ] {
        let new = debug(sc, target);
        let message = update_denied(&server, &stored, &new, Some(EPHEMERAL)).await;
        assert!(
            message.contains("ephemeral container 'debugger'") && message.contains(says),
            "{message}"
        );
    }
    // `kubectl debug`'s default: admitted, without NET_RAW or NET_ADMIN.
    let new = debug(Value::Null, Some("sandbox"));
    let (response, body) = ephemeral_update(&server, &stored, &new).await;
    assert_eq!(response["allowed"], true, "{response}");
    let debugged = applied(&new, &body);
    let (_, drop) = caps(&debugged["spec"]["ephemeralContainers"][0]);
    assert_eq!(drop, ["NET_ADMIN", "NET_RAW"]);
    let (again, _) = ephemeral_update(&server, &stored, &debugged).await;
    assert!(again.get("patch").is_none(), "{again}");
    // An ephemeral container the pod had before this request is not judged again.
    let (later, _) = ephemeral_update(&server, &debugged, &debugged).await;
    assert_eq!(later["allowed"], true);
    assert!(later.get("patch").is_none(), "{later}");
}
