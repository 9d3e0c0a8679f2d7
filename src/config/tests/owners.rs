//! `controller.expiry.ownerActions` and the deprecated `deleteOwnerKinds`.

use super::ok;
use crate::config::Config;
use crate::config::controller::OwnerAction;

/// The deprecated `deleteOwnerKinds` is read as `delete` for each kind, and
/// only those (a file that names them kept its meaning), with a warning;
/// both keys at once are refused (which wins would be a guess).
/// contract: config.controller
#[test]
fn delete_owner_kinds_is_read_as_delete_with_a_warning() {
    let c = ok("controller: {expiry: {deleteOwnerKinds: [Job.batch, Sandbox.agents.x-k8s.io]}}");
    assert_eq!(
        c.controller.owner_action("Job.batch"),
        Some(OwnerAction::Delete)
    );
    assert_eq!(
        c.controller.owner_action("Sandbox.agents.x-k8s.io"),
        Some(OwnerAction::Delete)
    );
    assert_eq!(
        c.controller
            .owner_action("BatchSandbox.sandbox.opensandbox.io"),
        None
    );
    let warnings = c.controller.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("deleteOwnerKinds is deprecated"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("ownerActions"), "{warnings:?}");
    let both = Config::from_yaml(
        "controller: {expiry: {deleteOwnerKinds: [Job.batch], ownerActions: {Job.batch: delete}}}",
    )
    .unwrap_err()
    .to_string();
    assert!(
        both.contains("controller.expiry.deleteOwnerKinds")
            && both.contains("set only ownerActions"),
        "{both}"
    );
}

/// `shutdown` and `suspend` are agent-sandbox's own lifecycle: only its
/// `Sandbox` has them. contract: config.controller
#[test]
fn owner_actions_are_checked() {
    let err = |y: &str| Config::from_yaml(y).unwrap_err().to_string();
    let msg = err("controller: {expiry: {ownerActions: {Job.batch: shutdown}}}");
    assert!(
        msg.contains("controller.expiry.ownerActions[\"Job.batch\"]")
            && msg.contains("shutdown applies only to Sandbox.agents.x-k8s.io"),
        "{msg}"
    );
    let msg = err("controller: {expiry: {ownerActions: {Sandbox.agents.x-k8s.io: Pause}}}");
    assert!(
        msg.contains("must be shutdown, suspend or delete; got the text 'Pause'"),
        "{msg}"
    );
    let msg = err("controller: {expiry: {ownerActions: {job.batch: delete}}}");
    assert!(msg.contains("is not Kind.group"), "{msg}");
    let msg = err("controller: {expiry: {ownerActions: [Job.batch]}}");
    assert!(msg.contains("must be a mapping of Kind.group"), "{msg}");
    let none = ok("controller: {expiry: {ownerActions: {}}}");
    assert!(none.controller.expiry.owner_actions.is_empty());
}

#[test]
fn controller_config() {
    let c = Config::default();
    assert_eq!(
        super::owner_actions(&c),
        crate::config::controller::DEFAULT_OWNER_ACTIONS.map(|(k, a)| (k.to_owned(), a))
    );
    assert!(!c.controller.platform.delete_unschedulable);
    let c = Config::from_yaml("controller: {platform: {deleteUnschedulable: true}}").unwrap();
    assert!(c.controller.platform.delete_unschedulable);
    assert_eq!(
        c.controller.expiry.owner_actions.len(),
        3,
        "other keys keep defaults"
    );
    let err = |y: &str| Config::from_yaml(y).unwrap_err().to_string();
    assert!(
        err("controller: {expiry: {deleteOwnerKinds: [job.batch]}}")
            .contains("controller.expiry.deleteOwnerKinds[0]")
    );
    assert!(
        err("controller: {expiry: {deleteOwnerKinds: null}}")
            .contains("controller.expiry.deleteOwnerKinds")
    );
    assert!(
        err("controller: {platform: {deleteUnschedulable: 1}}")
            .contains("controller.platform.deleteUnschedulable")
    );
    assert!(err("controller: {bogus: 1}").contains("bogus"));
}
