//! The mutation core: a pod, the configuration and the clock in; a JSON
//! patch, a skip or a denial out. Nothing here does I/O.

mod denial;
pub mod egress;
pub mod execd;
pub mod expiry;
pub mod intent;
mod patch;
pub mod platform;
pub mod pod;
pub mod policy;
mod py_printable;
mod pyrepr;
mod select;
pub mod unschedulable;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Config;

pub use denial::Denial;
pub use egress::{FixedToken, RandomTokens, TokenSource};
pub use execd::BOOTSTRAP;
pub use patch::{Patch, PatchBuilder};
pub use select::SkipReason;

use expiry::{Expiry, ExpiryIntent};
use intent::Intent;
use platform::{Os, SelectorChange};
use pod::{PodView, SpecView};

/// Everything the decision depends on besides the pod.
pub struct Context<'a> {
    pub config: &'a Config,
    pub now: DateTime<Utc>,
    /// The webhook's own namespace, always excluded.
    pub own_namespace: Option<&'a str>,
    pub tokens: &'a dyn TokenSource,
}

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
pub fn decide(pod_json: &str, namespace: Option<&str>, ctx: &Context<'_>) -> Decision {
    match PodView::parse(pod_json) {
        Ok(pod) => decide_view(&pod, namespace, ctx),
        Err(e) => Decision::Deny(Denial::MalformedPod(e.to_string())),
    }
}

pub fn decide_view(pod: &PodView<'_>, namespace: Option<&str>, ctx: &Context<'_>) -> Decision {
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

/// `Ok(None)`: the pod opted out.
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

    let affinity = intent
        .platform
        .as_ref()
        .and_then(|_| parse_raw(spec.affinity));
    let selector = match &intent.platform {
        Some(platform) => {
            platform::plan_node_selector(spec.node_selector, affinity.as_ref(), platform)
                .map_err(Denial::Platform)?
        }
        None => None,
    };

    let expiry = expiry::plan(
        &ExpiryIntent {
            has_expires_at: intent.has_expires_at,
            timeout: intent.timeout,
            timeout_key: &keys.timeout,
        },
        config.expiry.default_timeout_seconds,
        config.expiry.max_timeout_seconds,
        ctx.now,
    )?;

    let mut annotations: Vec<(&str, String)> = Vec::new();
    let mut labels: Vec<(&str, &str)> = Vec::new();
    let mut warnings = Vec::new();
    match expiry {
        Expiry::Keep => {}
        Expiry::At(at) => annotations.push((&keys.expires_at, at)),
        Expiry::Manual => {
            let current = pod.label(&keys.manual_cleanup).map(|raw| raw.get());
            if current != Some("\"true\"") {
                labels.push((&keys.manual_cleanup, "true"));
            }
        }
    }

    let mut spec_patch = PatchBuilder::default();
    if linux {
        inject(pod, main, &intent, ctx, &mut annotations, &mut spec_patch)?;
        if intent
            .policy
            .as_ref()
            .is_some_and(|p| p.deny_all_by_omission)
        {
            warnings.push(
                "network policy has no rules and no defaultAction: the egress sidecar denies all egress"
                    .to_owned(),
            );
        }
    } else {
        warnings.push(
            "platform is windows: execd and the egress sidecar are not injected into Windows pods"
                .to_owned(),
        );
    }

    let mut patch = PatchBuilder::default();
    patch.add_entries(
        &["metadata", "annotations"],
        pod.has_annotations(),
        &annotations,
    );
    patch.add_entries(&["metadata", "labels"], pod.has_labels(), &labels);
    patch.extend(spec_patch);
    selector_ops(selector, &mut patch);
    Ok(Some(Admission {
        patch: patch.finish().map_err(Denial::PatchEncoding)?,
        warnings,
    }))
}

/// execd and, with a network policy, the egress sidecar: Linux pods only.
fn inject<'a>(
    pod: &PodView<'_>,
    main: usize,
    intent: &Intent,
    ctx: &Context<'a>,
    annotations: &mut Vec<(&'a str, String)>,
    patch: &mut PatchBuilder,
) -> Result<(), Denial> {
    let config = ctx.config;
    let keys = config.keys();
    let spec = pod.spec();
    execd::check_conflicts(spec)?;
    let has_egress = egress::existing(spec)?;

    // The token outlives the sidecar that borrows it.
    let token: String;
    let sidecar = match &intent.policy {
        Some(policy) if !has_egress => {
            let image = config
                .egress
                .image
                .as_deref()
                .ok_or_else(|| Denial::NoEgressImage {
                    key: keys.network_policy.clone(),
                })?;
            token = match &intent.egress_token {
                Some(t) => t.clone(),
                None => {
                    let t = ctx.tokens.token().map_err(Denial::TokenUnavailable)?;
                    annotations.push((&keys.egress_auth_token, t.clone()));
                    t
                }
            };
            Some(egress::container(&egress::Sidecar {
                image,
                rules: &policy.json,
                mode: intent.egress_mode.unwrap_or(config.egress.mode),
                credential_proxy: intent.credential_proxy,
                token: &token,
                resources: config.egress.resources.as_ref(),
                native: config.egress.native_sidecar,
            }))
        }
        _ => None,
    };

    execd::volume_ops(spec, patch);

    // Init containers: the installer first, the native sidecar right after it,
    // so later init containers already run under egress control.
    let mut init = Vec::with_capacity(2);
    let first_new_at = match execd::existing_installer(spec) {
        Some(i) => i + 1,
        None => {
            let harden = intent.policy.is_some() && config.egress.disable_ipv6;
            init.push(InitContainer::Installer(execd::installer(
                &config.execd.image,
                config.execd.resources.as_ref(),
                harden,
            )));
            0
        }
    };
    let (native_sidecar, classic_sidecar) = match sidecar {
        Some(s) if config.egress.native_sidecar => (Some(s), None),
        other => (None, other),
    };
    init.extend(native_sidecar.map(InitContainer::Sidecar));
    if spec.init_containers.is_none() {
        patch.append(&["spec", "initContainers"], false, &init);
    } else {
        for (at, c) in (first_new_at..).zip(&init) {
            patch.add(&["spec", "initContainers", &at.to_string()], c);
        }
    }

    let c = &spec.containers()[main];
    execd::main_container_ops(
        c,
        main,
        &execd::MainNeeds {
            entrypoint: intent.entrypoint.as_deref(),
            entrypoint_key: &keys.entrypoint,
            credential_proxy: intent.credential_proxy,
            drop_net_admin: intent.policy.is_some(),
        },
        patch,
    )?;

    if let Some(s) = classic_sidecar {
        patch.append(&["spec", "containers"], true, &[s]);
    }
    Ok(())
}

/// The sandbox container: the one the annotation names, else `sandbox`, else
/// the first that is not an egress sidecar (OpenSandbox's classic layout
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
    Installer(execd::Installer<'a>),
    Sidecar(egress::Container<'a>),
}

fn selector_ops(change: Option<SelectorChange>, patch: &mut PatchBuilder) {
    match change {
        Some(SelectorChange::Create(e)) => {
            patch.add_entries(&["spec", "nodeSelector"], false, &e);
        }
        Some(SelectorChange::Set(e)) => {
            patch.add_entries(&["spec", "nodeSelector"], true, &e);
        }
        None => {}
    }
}

/// The seed reads these fields as untyped JSON; a value that is not valid
/// JSON cannot occur here because the pod itself parsed.
fn parse_raw(raw: Option<&serde_json::value::RawValue>) -> Option<serde_json::Value> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}
