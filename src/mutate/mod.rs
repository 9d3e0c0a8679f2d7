//! The mutation core: a pod, the configuration and the clock in; a JSON
//! patch, a skip or a denial out. Nothing here does I/O.

#[macro_use]
pub(crate) mod visit;

mod affinity;
mod context;
mod denial;
mod egress;
mod execd;
pub(crate) mod expires_at;
mod expiry;
mod intent;
mod k8s;
mod lists;
mod mistakes;
mod patch;
mod platform;
pub(crate) mod pod;
mod policy;
mod quote;
mod run_as;
mod select;
mod token;
mod typo;
pub(crate) mod unschedulable;

use serde::Serialize;

use crate::config::{Config, Keys};

pub use context::Context;
pub use denial::Denial;
pub use egress::strip_token as strip_egress_token;
pub use patch::Patch;
pub use platform::PlatformError;
pub use policy::PolicyError;
pub use select::SkipReason;
pub use token::{FixedToken, RandomTokens, TokenError, TokenSource, is_egress_token};
pub use typo::KNOWN as ANNOTATION_NAMES;

use egress::{Sidecar, TokenCompletion};
use execd::{Execd, InstallerPlan};
use expiry::Expiry;
use intent::Intent;
use patch::PatchBuilder;
use platform::{Os, SelectorChange};
use pod::{PodView, SpecView};

#[derive(Debug)]
pub enum Decision {
    /// Allowed untouched, for a reason that goes to logs, metrics and warnings.
    Skip(SkipReason),
    /// Allowed; an empty patch means the pod already has everything.
    Admit(Admission),
    Deny(Denial),
}

#[derive(Debug, Default)]
pub struct Admission {
    pub patch: Patch,
    /// Each at most 120 characters, for `kubectl` users.
    pub warnings: Vec<String>,
}

/// Decides for a Pod CREATE given the pod's raw JSON. `namespace` is the
/// request's namespace when there is one (the pod's own may be empty).
#[must_use]
pub fn decide(pod_json: &str, namespace: Option<&str>, ctx: &Context<'_>) -> Decision {
    match PodView::parse(pod_json) {
        Ok(pod) => decide_view(&pod, namespace, ctx),
        Err(_) => Decision::Deny(Denial::MalformedPod(PodView::unreadable(pod_json, ""))),
    }
}

#[must_use]
pub(crate) fn decide_view(
    pod: &PodView<'_>,
    namespace: Option<&str>,
    ctx: &Context<'_>,
) -> Decision {
    let namespace = namespace
        .filter(|n| !n.is_empty())
        .or(pod.namespace())
        .unwrap_or("default");
    if let Some(reason) = select::skip_reason(pod, namespace, ctx) {
        return Decision::Skip(reason);
    }
    match mutate(pod, ctx) {
        Ok(Some(admission)) => Decision::Admit(admission),
        Ok(None) => Decision::Skip(SkipReason::OptOut),
        Err(denial) => Decision::Deny(denial),
    }
}

/// `Ok(None)`: the pod opted out. The checks run in a fixed order, so a pod
/// with several problems always gets the same denial.
fn mutate(pod: &PodView<'_>, ctx: &Context<'_>) -> Result<Option<Admission>, Denial> {
    let config = ctx.config;
    let keys = config.keys();
    let Some(intent) = intent::read(pod, config)? else {
        return Ok(None);
    };
    let spec = pod.spec();

    if intent.policy.is_some() && spec.host_network == Some(true) {
        return Err(Denial::HostNetworkWithPolicy {
            key: keys.network_policy.clone(),
        });
    }

    let main = main_container(spec, &intent, config)?;
    let linux = intent.platform.as_ref().is_none_or(|p| p.os == Os::Linux);
    if linux && intent.policy.is_some() {
        egress::check_main(&spec.containers()[main], &keys.network_policy)?;
    }

    let selector = match &intent.platform {
        Some(platform) => {
            platform::plan_node_selector(spec.node_selector.as_ref(), spec.affinity, platform)
                .map_err(Denial::Platform)?
        }
        None => None,
    };
    let expiry = expiry::change(pod, &intent, ctx)?;
    let injection = if linux {
        Some(inject(spec, main, &intent, ctx)?)
    } else {
        None
    };

    let mut warnings = Vec::new();
    if !linux {
        warnings.push(
            "platform is windows: execd and the egress sidecar are not injected into Windows pods"
                .to_owned(),
        );
    } else if intent
        .policy
        .as_ref()
        .is_some_and(|p| p.deny_all_by_omission)
    {
        warnings.push(
            "network policy has no rules and no defaultAction: the egress sidecar denies all egress"
                .to_owned(),
        );
    }

    if let Some(injection) = &injection {
        warnings.extend(injection.runs_as_root_warning(spec));
    }
    mistakes::warn(pod, &intent, ctx, &mut warnings);

    let patch = Parts {
        expiry,
        injection,
        selector,
    }
    .patch(pod, keys)
    .map_err(Denial::PatchEncoding)?;
    Ok(Some(Admission { patch, warnings }))
}

/// What execd and, with a network policy, the egress sidecar still need:
/// Linux pods only.
struct Injection<'a> {
    execd: Execd<'a>,
    sidecar: Option<Sidecar<'a>>,
    /// A sidecar that is there without its token (from a template).
    token: Option<TokenCompletion<'a>>,
}

impl Injection<'_> {
    /// Said when the pod asks for a non-root user and gets containers that
    /// run as root (`run_as`).
    fn runs_as_root_warning(&self, spec: &SpecView<'_>) -> Option<String> {
        if !run_as::PodUser::of(spec).asks_non_root() {
            return None;
        }
        let installer = matches!(&self.execd.installer, InstallerPlan::Add(i) if i.privileged());
        run_as::warning(self.sidecar.is_some(), installer)
    }
}

fn inject<'a>(
    spec: &SpecView<'_>,
    main: usize,
    intent: &'a Intent,
    ctx: &Context<'a>,
) -> Result<Injection<'a>, Denial> {
    execd::check_conflicts(spec)?;
    let sidecar = egress::plan(spec, intent, ctx)?;
    let token = egress::complete(spec, intent, ctx)?;
    let execd = execd::plan(spec, main, intent, ctx.config)?;
    Ok(Injection {
        execd,
        sidecar,
        token,
    })
}

/// Every change the pod still needs, each decided by its own module; `patch`
/// is the one place they become operations, in a fixed order.
struct Parts<'a> {
    expiry: Option<Expiry>,
    injection: Option<Injection<'a>>,
    selector: Option<SelectorChange>,
}

impl Parts<'_> {
    fn patch(self, pod: &PodView<'_>, keys: &Keys) -> Result<Patch, String> {
        let spec = pod.spec();
        let mut annotations: Vec<(&str, &str)> = Vec::new();
        let mut labels: Vec<(&str, &str)> = Vec::new();
        match &self.expiry {
            Some(Expiry::At(at)) => annotations.push((&keys.expires_at, at)),
            Some(Expiry::Manual) => labels.push((&keys.manual_cleanup, "true")),
            Some(Expiry::Keep) | None => {}
        }
        let new_token = self.injection.as_ref().and_then(|i| {
            i.sidecar
                .as_ref()
                .and_then(Sidecar::new_token)
                .or_else(|| i.token.as_ref().and_then(TokenCompletion::new_token))
        });
        if let Some(token) = new_token {
            annotations.push((&keys.egress_auth_token, token));
        }

        let mut patch = PatchBuilder::default();
        patch.add_entries(
            &["metadata", "annotations"],
            pod.has_annotations(),
            &annotations,
        );
        patch.add_entries(&["metadata", "labels"], pod.has_labels(), &labels);
        if let Some(injection) = &self.injection {
            let (native, classic) = match &injection.sidecar {
                Some(s) if s.native => (Some(s), None),
                other => (None, other.as_ref()),
            };
            injection.execd.write_volume(&mut patch);
            if let Some(token) = &injection.token {
                token.write(&mut patch);
            }
            init_container_ops(spec, &injection.execd.installer, native, &mut patch);
            injection.execd.write_main(&mut patch);
            if let Some(s) = classic {
                patch.append(&["spec", "containers"], true, &[s]);
            }
        }
        match self.selector {
            Some(SelectorChange::Create(e)) => {
                patch.add_entries(&["spec", "nodeSelector"], false, &e);
            }
            Some(SelectorChange::Set(e)) => {
                patch.add_entries(&["spec", "nodeSelector"], true, &e);
            }
            None => {}
        }
        patch.finish()
    }
}

/// The one place init-container positions are decided: the installer
/// first, the native sidecar right after it, so later init containers
/// already run under egress control.
fn init_container_ops(
    spec: &SpecView<'_>,
    installer: &InstallerPlan<'_>,
    native_sidecar: Option<&Sidecar<'_>>,
    patch: &mut PatchBuilder,
) {
    let (first_at, installer) = match installer {
        InstallerPlan::Present(at) => (at + 1, None),
        InstallerPlan::Add(i) => (0, Some(InitContainer::Installer(i))),
    };
    let new: Vec<InitContainer<'_>> = installer
        .into_iter()
        .chain(native_sidecar.map(InitContainer::Sidecar))
        .collect();
    if spec.init_containers.is_none() {
        patch.append(&["spec", "initContainers"], false, &new);
    } else {
        for (at, c) in (first_at..).zip(&new) {
            patch.add(&["spec", "initContainers", &at.to_string()], c);
        }
    }
}

/// The sandbox container: the one the annotation names, else `sandbox`, else
/// the first that is not an egress sidecar (the classic `OpenSandbox` layout
/// puts the sidecar among the containers).
fn main_container(spec: &SpecView<'_>, intent: &Intent, config: &Config) -> Result<usize, Denial> {
    let containers = spec.containers();
    if containers.is_empty() {
        return Err(Denial::NoContainers);
    }
    if let Some(name) = &intent.main_container {
        return containers
            .iter()
            .position(|c| c.name == name.as_str())
            .ok_or_else(|| Denial::MainContainerNotFound {
                key: config.keys().main_container.clone(),
                name: name.clone(),
                known: containers
                    .iter()
                    .map(|c| c.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
    }
    Ok(containers
        .iter()
        .position(|c| c.name == "sandbox")
        .or_else(|| containers.iter().position(|c| c.name != egress::EGRESS))
        .unwrap_or(0))
}

/// What goes into `spec.initContainers`: one list, two shapes.
#[derive(Serialize)]
#[serde(untagged)]
enum InitContainer<'a> {
    Installer(&'a execd::Installer<'a>),
    Sidecar(&'a Sidecar<'a>),
}
