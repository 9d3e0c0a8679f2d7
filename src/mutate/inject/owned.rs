//! The names the webhook injects under (contract: execd.installer-present,
//! egress.present), as a pod already holds them: where each is, and whether it
//! looks like the webhook's own (which `layout` then checks to be exactly that)
//! or is someone else's container under a reserved name (a denial).
//!
//! "Looks like" is the mark each injected container carries for what it
//! does: the installer mounts the binary volume where execd expects it,
//! the sidecar carries its rules. A container under a reserved name without
//! that mark is not a stale or spoofed copy of the webhook's but a
//! container of the pod's own that happens to use the name; replacing it
//! would silently drop it, so it is refused instead.

use crate::mutate::denial::Denial;
use crate::mutate::read::k8s::KnownEnv;
use crate::mutate::read::pod::{ContainerView, SpecView};

/// The installer init container's name.
pub(crate) const INSTALLER: &str = "execd-installer";
/// The egress sidecar's name.
pub(crate) const EGRESS: &str = "egress";

/// `spec.initContainers` or `spec.containers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum List {
    Init,
    Main,
}

impl List {
    /// The field's name, for patch paths.
    pub(crate) const fn field(self) -> &'static str {
        match self {
            List::Init => "initContainers",
            List::Main => "containers",
        }
    }

    /// What an item of it is called in a sentence.
    pub(crate) const fn noun(self) -> &'static str {
        match self {
            List::Init => "init container",
            List::Main => "container",
        }
    }
}

/// A container's place in the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    pub list: List,
    pub index: usize,
}

/// What the pod holds under the webhook's container names.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owned {
    /// An installer, always an init container.
    pub installer: Option<usize>,
    /// An egress sidecar, in either list.
    pub sidecar: Option<At>,
}

impl Owned {
    /// Whether the container at `at` is one of these (the security checks
    /// leave them to `layout`, which makes them exactly the webhook's).
    pub(crate) fn holds(self, at: At) -> bool {
        self.sidecar == Some(at) || (at.list == List::Init && self.installer == Some(at.index))
    }

    pub(crate) fn any(self) -> bool {
        self.installer.is_some() || self.sidecar.is_some()
    }
}

/// Finds the webhook's containers in `spec`. A reserved name on a
/// container without the webhook's mark, in the wrong list, or on two
/// containers (which the apiserver refuses anyway) is a denial.
pub(crate) fn find(spec: &SpecView<'_>) -> Result<Owned, Denial> {
    let mut owned = Owned::default();
    for (list, containers) in [
        (List::Init, spec.init_containers()),
        (List::Main, spec.containers()),
    ] {
        for (index, c) in containers.iter().enumerate() {
            let at = At { list, index };
            match c.name.as_ref() {
                INSTALLER if list == List::Init && c.mounts_bin() => {
                    once(&mut owned.installer, index, INSTALLER)?;
                }
                EGRESS if is_sidecar(c) => {
                    once(&mut owned.sidecar, at, EGRESS)?;
                }
                name @ (INSTALLER | EGRESS) => {
                    return Err(Denial::ReservedContainerName {
                        list: list.noun(),
                        name: name.to_owned(),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(owned)
}

/// A container named `egress` that carries the sidecar's rules is the
/// webhook's sidecar, or a copy of it to be checked.
fn is_sidecar(c: &ContainerView<'_>) -> bool {
    c.has_env(KnownEnv::EgressRules)
}

fn once<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), Denial> {
    if slot.is_some() {
        return Err(Denial::DuplicateContainerName {
            name: name.to_owned(),
        });
    }
    *slot = Some(value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::read::pod::PodView;

    fn find_in(spec: &str) -> Result<Owned, Denial> {
        let raw = format!(r#"{{"spec":{spec}}}"#);
        let pod = PodView::parse(&raw).unwrap();
        find(pod.spec())
    }

    const BIN: &str =
        r#""volumeMounts":[{"name":"opensandbox-bin","mountPath":"/opt/opensandbox"}]"#;
    const RULES: &str = r#""env":[{"name":"OPENSANDBOX_EGRESS_RULES","value":"{}"}]"#;

    #[test]
    fn finds_the_marked_ones_in_either_list() {
        let owned = find_in(&format!(
            r#"{{"initContainers":[{{"name":"x"}},{{"name":"execd-installer",{BIN}}}],
                "containers":[{{"name":"sandbox"}},{{"name":"egress",{RULES}}}]}}"#
        ))
        .unwrap();
        assert_eq!(owned.installer, Some(1));
        let sidecar = At {
            list: List::Main,
            index: 1,
        };
        assert_eq!(owned.sidecar, Some(sidecar));
        assert!(owned.holds(sidecar) && owned.any());
        assert!(owned.holds(At {
            list: List::Init,
            index: 1
        }));
        assert!(!owned.holds(At {
            list: List::Main,
            index: 0
        }));
        let init = find_in(&format!(
            r#"{{"initContainers":[{{"name":"egress",{RULES}}}],"containers":[{{"name":"a"}}]}}"#
        ))
        .unwrap();
        assert_eq!(init.sidecar.map(|s| s.list), Some(List::Init));
        assert_eq!(
            find_in(r#"{"containers":[{"name":"a"}]}"#).unwrap(),
            Owned::default()
        );
    }

    #[test]
    fn unmarked_misplaced_or_repeated_names_are_denied() {
        for (spec, says) in [
            (
                r#"{"containers":[{"name":"egress","image":"my/proxy"}]}"#.to_owned(),
                "container 'egress' was not injected",
            ),
            (
                r#"{"initContainers":[{"name":"execd-installer","image":"x"}]}"#.to_owned(),
                "init container 'execd-installer' was not injected",
            ),
            (
                format!(r#"{{"containers":[{{"name":"execd-installer",{BIN}}}]}}"#),
                "container 'execd-installer' was not injected",
            ),
            (
                format!(
                    r#"{{"initContainers":[{{"name":"egress",{RULES}}}],"containers":[{{"name":"egress",{RULES}}}]}}"#
                ),
                "'egress' more than once",
            ),
            (
                format!(
                    r#"{{"initContainers":[{{"name":"execd-installer",{BIN}}},{{"name":"execd-installer",{BIN}}}]}}"#
                ),
                "'execd-installer' more than once",
            ),
        ] {
            let message = find_in(&spec).unwrap_err().to_string();
            assert!(message.contains(says), "{spec}: {message}");
        }
    }
}
