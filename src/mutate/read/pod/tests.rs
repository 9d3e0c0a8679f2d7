//! The pod view's readers.

use super::*;
use crate::mutate::read::lists::{Capabilities, VolumeAt};

#[test]
fn borrows_what_it_can_and_reads_escapes() {
    let raw = r#"{"metadata":{"annotations":{"a":"1","b\u002fc":"2","a":"3"}},
        "spec":{"containers":[{"name":"m","command":["x","\u0079"],
        "securityContext":{"capabilities":{"add":["NET\u005fRAW"],"drop":["ALL"]}}},
        {"securityContext":{"capabilities":{"drop":["NET_RAW","SYS_TIME"]}}}]}}"#;
    let pod = PodView::parse(raw).unwrap();
    // The last of a repeated key wins.
    assert_eq!(pod.annotation("a").map(RawValue::get), Some("\"3\""));
    assert_eq!(pod.annotation("b/c").map(RawValue::get), Some("\"2\""));
    assert!(pod.annotation("c").is_none());
    let c = &pod.spec().containers()[0];
    assert_eq!(c.command, Some(Command::Other));
    let caps = c.capabilities().unwrap();
    let named = |c: &Capabilities| c.first_net.map(|n| (n.capability(), n.unusual));
    let net_raw = Some(("NET_RAW", false));
    assert_eq!(named(caps.add.as_ref().unwrap()), net_raw);
    let drop = caps.drop.as_ref().unwrap();
    // Dropping ALL drops NET_ADMIN and NET_RAW too; dropping NET_RAW does
    // not drop NET_ADMIN.
    assert!(drop.drops_net_admin && drop.drops_net_raw);
    let other = pod.spec().containers()[1].capabilities().unwrap();
    let drop = other.drop.as_ref().unwrap();
    assert!(!drop.drops_net_admin && drop.drops_net_raw);
}

/// Each list is read into what the decisions ask of it, item by item,
/// escapes decoded.
#[test]
fn lists_are_read_into_what_the_decisions_need() {
    let raw = r#"{"spec":{"containers":[
        {"name":"a","command":["/opt/opensandbox/bootstrap.sh","x"],
         "env":[{"name":"X"},{"name":"EXEC\u0044","value":"v"},{"name":"OPENSANDBOX_EGRESS_RULES"},
                {"name":"OPENSANDBOX_EGRESS_TOKEN"}],
         "volumeMounts":[{"name":"data","mountPath":"/opt/opensandbox/"},{"name":"other","mountPath":"/opt/opensandbox"},
                         {"name":"opensandbox-bin","mountPath":"/opt/opensandbox//"}],
         "securityContext":{"capabilities":{"add":["SYS_TIME","cap_net_raw","ALL"],"drop":["ALL","net_admin"]}}},
        {"name":"b","command":[],"env":[],"volumeMounts":[{"name":"opensandbox-bin","mountPath":"/bin"}]}],
        "volumes":[{"name":"x"},{"name":"opensandbox-bin","hostPath":{}},{"name":"opensandbox-bin","emptyDir":{}}]}}"#;
    let pod = PodView::parse(raw).unwrap();
    let [a, b] = pod.spec().containers() else {
        panic!("two containers")
    };
    assert_eq!(a.command, Some(Command::Wrapped));
    assert!(a.has_env(KnownEnv::Execd) && a.has_env(KnownEnv::EgressRules));
    assert!(a.has_env(KnownEnv::EgressToken) && !a.has_env(KnownEnv::Mitm));
    let mounts = a.volume_mounts.as_ref().unwrap();
    assert!(mounts.bin && a.mounts_bin());
    assert_eq!(mounts.bin_path_taken_by.as_deref(), Some("data"));
    let caps = a.capabilities().unwrap();
    // As a runtime could read it: `cap_net_raw` is NET_RAW to CRI-O.
    let first = caps.add.as_ref().unwrap().first_net.unwrap();
    assert_eq!((first.capability(), first.unusual), ("NET_RAW", false));
    assert!(caps.drop.as_ref().unwrap().drops_net_admin);

    assert_eq!(b.command, Some(Command::Empty));
    assert_eq!(b.env, Some(EnvNames::default()));
    assert!(
        !b.mounts_bin()
            && b.volume_mounts
                .as_ref()
                .unwrap()
                .bin_path_taken_by
                .is_none()
    );
    // The first volume of that name decides.
    let volumes = pod.spec().volumes.as_ref().unwrap();
    assert_eq!(
        volumes.bin,
        Some(VolumeAt {
            index: 1,
            empty_dir: false
        })
    );
    assert_eq!(volumes.len, 3);
}

/// A malformed item is refused as it was when the items were kept.
#[test]
fn malformed_items_are_refused() {
    for (raw, says) in [
        (
            r#"{"spec":{"containers":[{"env":[{"name":1}]}]}}"#,
            "invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"spec":{"containers":[{"command":"sh"}]}}"#,
            "expected an array",
        ),
        (
            r#"{"spec":{"containers":[{"command":[1]}]}}"#,
            "invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"spec":{"volumes":[{"name":"v"},7]}}"#,
            "expected an object",
        ),
    ] {
        let err = PodView::parse(raw).unwrap_err().to_string();
        assert!(err.contains(says), "{raw}: {err}");
    }
}

/// serde's derived readers would take an array for an object, its
/// items read into the fields in order (`[true]` as `privileged: true`).
#[test]
fn arrays_are_not_objects() {
    for (raw, path) in [
        (r"[]", ""),
        (r#"{"metadata":[]}"#, "metadata"),
        (r#"{"spec":[[{"name":"a"}]]}"#, "spec"),
        (
            r#"{"spec":{"securityContext":[true, 0]}}"#,
            "spec.securityContext",
        ),
        (r#"{"spec":{"containers":[["a"]]}}"#, "spec.containers[0]"),
        (
            r#"{"spec":{"containers":[{"securityContext":[true]}]}}"#,
            "spec.containers[0].securityContext",
        ),
        (
            r#"{"spec":{"containers":[{"securityContext":{"capabilities":[["NET_ADMIN"]]}}]}}"#,
            "spec.containers[0].securityContext.capabilities",
        ),
        (
            r#"{"spec":{"containers":[{"env":[["EXECD"]]}]}}"#,
            "spec.containers[0].env[0]",
        ),
        (
            r#"{"spec":{"containers":[{"volumeMounts":[["opensandbox-bin","/opt/opensandbox"]]}]}}"#,
            "spec.containers[0].volumeMounts[0]",
        ),
        (
            r#"{"spec":{"volumes":[["opensandbox-bin"]]}}"#,
            "spec.volumes[0]",
        ),
    ] {
        assert!(PodView::parse(raw).is_err(), "{raw} was read");
        let why = PodView::unreadable(raw, "");
        let at = if path.is_empty() {
            String::new()
        } else {
            format!("{path}: ")
        };
        assert_eq!(
            why,
            format!("{at}expected an object, got an array"),
            "{raw}"
        );
    }
}

/// A pod's containers are read into a list whose first block glibc serves
/// from its per-thread cache (1,032 bytes at most), with room for more
/// than one container.
#[test]
fn a_container_list_starts_within_the_allocators_thread_cache() {
    let room = list_capacity::<ContainerView<'_>>();
    let bytes = room * size_of::<ContainerView<'_>>();
    assert!(
        (2..=8).contains(&room) && bytes <= 1024,
        "{room} containers of {} bytes",
        size_of::<ContainerView<'_>>()
    );
}
