//! The mutation core: a pod, the configuration and the clock in; a JSON
//! patch, a skip or a denial out. Nothing here does I/O.

pub(crate) mod read;

pub(crate) mod intent;

mod context;
mod denial;
pub(crate) mod inject;
mod main_container;
mod mistakes;
mod patch;
mod quote;
mod select;
mod update;

use smallvec::SmallVec;

use crate::config::{Config, Keys};

pub use context::Context;
pub use denial::Denial;
pub use inject::egress::strip_token as strip_egress_token;
pub use inject::record::{Injected, make as injection_record};
pub use inject::server::{Risk, ServerCompleted};
pub use intent::platform::PlatformError;
pub use intent::policy::PolicyError;
pub use intent::token::{FixedToken, RandomTokens, TokenError, TokenSource, is_egress_token};
pub use intent::typo::KNOWN as ANNOTATION_NAMES;
pub use patch::Patch;
pub use select::SkipReason;
pub(crate) use update::{EPHEMERAL_CONTAINERS, judge as judge_update};

use inject::automount::Automount;
use inject::egress::Sidecar;
use inject::execd::Installer;
use inject::expiry::Expiry;
use inject::guard::Drops;
use inject::layout::{Layout, Wanted};
use inject::owned::Owned;
use inject::sandbox::SandboxChanges;
use intent::Intent;
use intent::platform::{Os, SelectorChange};
use main_container::main_container;
use patch::{PatchBuilder, Str};
use read::pod::{PodView, SpecView};

#[derive(Debug)]
pub enum Decision {
    /// Allowed untouched, for a reason that goes to logs, metrics and warnings.
    Skip(SkipReason),
    /// A pod OpenSandbox's server already completed, allowed with what it
    /// built kept as built (contract: coexist.kept): nothing of it was
    /// injected by this webhook. An empty patch is skip reason
    /// `server-completed`.
    ServerCompleted(Completed),
    /// Allowed; an empty patch means the pod already has everything.
    Admit(Admission),
    Deny(Denial),
}

/// What the webhook answers for a pod OpenSandbox's server completed.
#[derive(Debug)]
pub struct Completed {
    pub built: ServerCompleted,
    /// Only what the pod's own annotations ask of the platform and the
    /// expiry (sections 5 and 6); the server's own pods carry none, so
    /// their patch is empty.
    pub admission: Admission,
    /// A shape that could undo the server's policy, warned about and
    /// counted (contract: coexist.risks).
    pub risk: Option<Risk>,
}

#[derive(Debug, Default)]
pub struct Admission {
    pub patch: Patch,
    /// Each at most 120 characters, for `kubectl` users.
    pub warnings: Vec<String>,
    /// The pod's injection record, whether the patch writes it or the pod
    /// holds it already; `None` for what the webhook does not complete.
    pub injected: Option<Injected>,
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
    let namespace = select::request_namespace(namespace, pod);
    if let Some(reason) = select::skip_reason(pod, namespace, ctx) {
        return Decision::Skip(reason);
    }
    mutate(pod, ctx).unwrap_or_else(Decision::Deny)
}

/// An UPDATE's judgement as the webhook answers it: an admitted UPDATE
/// carries a patch only, no warnings and no injection record.
impl From<update::Judged> for Decision {
    fn from(judged: update::Judged) -> Self {
        match judged {
            update::Judged::Skip(reason) => Decision::Skip(reason),
            update::Judged::Admit(patch) => Decision::Admit(Admission {
                patch,
                warnings: Vec::new(),
                injected: None,
            }),
            update::Judged::Deny(denial) => Decision::Deny(denial),
        }
    }
}

/// The checks run in a fixed order, so a pod with several problems always
/// gets the same denial.
fn mutate(pod: &PodView<'_>, ctx: &Context<'_>) -> Result<Decision, Denial> {
    let config = ctx.config;
    let keys = config.keys();
    let Some(intent) = intent::read(pod, config)? else {
        return Ok(Decision::Skip(SkipReason::OptOut));
    };
    let spec = pod.spec();

    if intent.policy.is_some() && spec.host_network == Some(true) {
        return Err(Denial::HostNetworkWithPolicy {
            key: keys.network_policy.clone(),
        });
    }

    let main = main_container(spec, &intent, config)?;
    if intent.policy.is_none()
        && let Some(built) = server_completed_view(pod, main)
    {
        return completed(pod, built, &intent, ctx).map(Decision::ServerCompleted);
    }
    let linux = intent.platform.as_ref().is_none_or(|p| p.os == Os::Linux);
    if intent.policy.is_some() && !linux {
        // No sidecar goes into a Windows pod: never admitted without the
        // egress control it asks for (contract: egress.windows).
        return Err(Denial::WindowsWithPolicy {
            key: keys.network_policy.clone(),
            platform_key: keys.platform.clone(),
        });
    }
    let owned = if linux {
        let owned = inject::owned::find(spec)?;
        if intent.policy.is_some() {
            inject::egress::check_runtime(spec, config)?;
            inject::egress::check_privileges(spec, owned, &keys.network_policy)?;
            inject::guard::check(pod, owned, &intent, config)?;
        }
        owned
    } else {
        Owned::default()
    };
    let drops = intent
        .policy
        .as_ref()
        .filter(|_| linux)
        .map(|_| inject::guard::plan_drops(spec, owned, main));

    let selector = node_selector(spec, &intent)?;
    let expiry = inject::expiry::change(pod, &intent, ctx)?;
    let injection = if linux {
        Some(inject(pod, main, owned, &intent, ctx)?)
    } else {
        None
    };
    let automount = inject::automount::plan(spec, config);

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
        warnings.extend(injection.layout.warnings.iter().cloned());
        warnings.extend(injection.runs_as_root_warning(spec));
    }
    warnings.extend(automount.warning.map(str::to_owned));
    if intent.credential_proxy && intent.policy.as_ref().is_some_and(|p| p.default_allow) {
        warnings.push(CREDENTIAL_PROXY_ALLOW.to_owned());
    }
    mistakes::warn(pod, &intent, ctx, &mut warnings);

    let rules = injection
        .as_ref()
        .and_then(|i| i.sidecar.as_ref())
        .map(Sidecar::rules);
    let injected = Some(inject::record::make(config, linux, rules));
    let patch = Parts {
        expiry,
        injection,
        drops,
        selector,
        automount,
        owned,
        record: injected.as_ref(),
        revision: config.revision.as_deref().filter(|_| injected.is_some()),
    }
    .patch(pod, keys)
    .map_err(Denial::PatchEncoding)?;
    Ok(Decision::Admit(Admission {
        patch,
        warnings,
        injected,
    }))
}

/// Whether OpenSandbox's server (or an OpenSandbox installer such as this
/// webhook's) completed the pod `pod_json` (contract: coexist.recognised):
/// what [`decide`] answers with [`Decision::ServerCompleted`] for, when the
/// pod asks this webhook for no policy (with `<prefix>/network-policy` the
/// webhook's rules apply to any pod). `None` for a pod that cannot be read
/// or whose main container cannot be told.
#[must_use]
pub fn server_completed(pod_json: &str, config: &Config) -> Option<ServerCompleted> {
    let pod = PodView::parse(pod_json).ok()?;
    let intent = intent::read(&pod, config).ok()??;
    let main = main_container(pod.spec(), &intent, config).ok()?;
    server_completed_view(&pod, main)
}

/// [`server_completed`] on a pod already read, whose main container is
/// `spec.containers[main]`.
fn server_completed_view(pod: &PodView<'_>, main: usize) -> Option<ServerCompleted> {
    inject::server::recognise(pod, pod.spec().containers().get(main)?)
}

/// A pod OpenSandbox's server completed (contract: coexist.kept): only the
/// platform and expiry its own annotations ask for (a template may add
/// them) are written, and the service-account token setting, which the
/// server's pods already have (so a pod that only looks completed gets no
/// token by accident); a shape that could undo its sidecar's policy is
/// warned about.
fn completed(
    pod: &PodView<'_>,
    built: ServerCompleted,
    intent: &Intent,
    ctx: &Context<'_>,
) -> Result<Completed, Denial> {
    let spec = pod.spec();
    let selector = node_selector(spec, intent)?;
    let expiry = inject::expiry::change(pod, intent, ctx)?;
    let risk = inject::server::risk(spec);
    let automount = inject::automount::plan(spec, ctx.config);
    let mut warnings: Vec<String> = risk.iter().map(|(_, w)| w.clone()).collect();
    warnings.extend(automount.warning.map(str::to_owned));
    mistakes::warn(pod, intent, ctx, &mut warnings);
    let patch = Parts {
        expiry,
        injection: None,
        selector,
        automount,
        owned: Owned::default(),
        drops: None,
        record: None,
        revision: None,
    }
    .patch(pod, ctx.config.keys())
    .map_err(Denial::PatchEncoding)?;
    Ok(Completed {
        built,
        admission: Admission {
            patch,
            warnings,
            injected: None,
        },
        risk: risk.map(|(r, _)| r),
    })
}

/// The nodeSelector change the pod's platform asks for, if any (contract:
/// platform.merge), for injected and server-completed pods alike.
fn node_selector(spec: &SpecView<'_>, intent: &Intent) -> Result<Option<SelectorChange>, Denial> {
    let Some(platform) = &intent.platform else {
        return Ok(None);
    };
    intent::platform::plan_node_selector(spec.node_selector.as_ref(), spec.affinity, platform)
        .map_err(Denial::Platform)
}

/// Upstream allows it for compatibility and logs that it is deprecated
/// (admitted with a warning; contract: warning.credential-proxy-allow).
const CREDENTIAL_PROXY_ALLOW: &str = "credential proxy with defaultAction allow: a credential-bound host may be reached around it; use deny";

/// What execd and, with a network policy, the egress sidecar still need:
/// Linux pods only.
struct Injection<'a> {
    installer: Installer<'a>,
    sandbox: SandboxChanges<'a>,
    sidecar: Option<Sidecar<'a>>,
    /// Where they go, and what the pod's own copies still need.
    layout: Layout<'a>,
    /// The main container's index in `spec.containers`.
    main: usize,
    isolation: bool,
}

impl<'a> Injection<'a> {
    fn wanted(&self) -> Wanted<'_, 'a> {
        Wanted {
            installer: &self.installer,
            sidecar: self.sidecar.as_ref(),
            isolation: self.isolation,
        }
    }

    /// Said when the pod asks for a non-root user and gets containers that
    /// run as root (`run_as`).
    fn runs_as_root_warning(&self, spec: &SpecView<'_>) -> Option<String> {
        if !inject::run_as::PodUser::of(spec).asks_non_root() {
            return None;
        }
        let (installer, sidecar) = self.layout.writes(&self.wanted());
        inject::run_as::warning(sidecar, installer && self.installer.privileged())
    }
}

fn inject<'a>(
    pod: &PodView<'a>,
    main: usize,
    owned: Owned,
    intent: &'a Intent,
    ctx: &Context<'a>,
) -> Result<Injection<'a>, Denial> {
    let spec = pod.spec();
    inject::execd::check_conflicts(spec, intent.isolation)?;
    let sidecar = inject::egress::plan(pod, owned, intent, ctx)?;
    let installer = inject::execd::plan(spec, intent, ctx.config);
    let sandbox = inject::sandbox::plan(pod, main, intent, ctx.config)?;
    let layout = inject::layout::plan(
        pod,
        owned,
        &Wanted {
            installer: &installer,
            sidecar: sidecar.as_ref(),
            isolation: intent.isolation,
        },
    )?;
    Ok(Injection {
        installer,
        sandbox,
        sidecar,
        layout,
        main,
        isolation: intent.isolation,
    })
}

/// Every change the pod still needs, each decided by its own module; `patch`
/// is the one place they become operations, in a fixed order.
struct Parts<'a> {
    expiry: Option<Expiry>,
    injection: Option<Injection<'a>>,
    /// What the pod's other containers drop beside a policy.
    drops: Option<Drops>,
    selector: Option<SelectorChange>,
    automount: Automount,
    owned: Owned,
    /// The injection record, written unless the pod holds it already.
    record: Option<&'a Injected>,
    /// The release's revision, labelled on the pod unless it is already.
    revision: Option<&'a str>,
}

impl Parts<'_> {
    fn patch(self, pod: &PodView<'_>, keys: &Keys) -> Result<Patch, String> {
        let spec = pod.spec();
        // At most three annotations and two labels: on the stack.
        let mut annotations: SmallVec<[(&str, Str<'_>); 3]> = SmallVec::new();
        let mut labels: SmallVec<[(&str, Str<'_>); 2]> = SmallVec::new();
        match &self.expiry {
            Some(Expiry::At(at)) => annotations.push((&keys.expires_at, Str::Text(at))),
            Some(Expiry::Manual) => labels.push((&keys.manual_cleanup, Str::Text("true"))),
            Some(Expiry::Keep) | None => {}
        }
        let new_token = self
            .injection
            .as_ref()
            .and_then(|i| i.sidecar.as_ref().and_then(Sidecar::new_token));
        if let Some(token) = new_token {
            annotations.push((&keys.egress_auth_token, Str::Text(token)));
        }
        if let Some(record) = self.record
            && !holds(pod.annotation(&keys.injected), &record.value)
        {
            annotations.push((&keys.injected, Str::Json(record.value_json())));
        }
        if let Some(revision) = self.revision
            && !holds(pod.label(&keys.rev), revision)
        {
            labels.push((&keys.rev, Str::Text(revision)));
        }

        let mut patch = PatchBuilder::default();
        patch.add_strings(
            ["metadata", "annotations"],
            pod.has_annotations(),
            &annotations,
        );
        patch.add_strings(["metadata", "labels"], pod.has_labels(), &labels);
        if let Some(injection) = &self.injection {
            let wanted = injection.wanted();
            let layout = &injection.layout;
            layout.write_first(&mut patch);
            layout.write_init(spec, &wanted, &mut patch);
            injection
                .sandbox
                .write(layout.main_index(injection.main), &mut patch);
            layout.write_last(&wanted, &mut patch);
            if let Some(drops) = &self.drops {
                drops.write(layout, self.owned, &mut patch);
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
        self.automount.write(
            self.injection.as_ref().map(|i| &i.layout),
            self.owned,
            &mut patch,
        );
        patch.finish()
    }
}

/// Whether a label or annotation holds exactly `value`.
fn holds(raw: Option<&serde_json::value::RawValue>, value: &str) -> bool {
    raw.and_then(|raw| intent::decode_string(raw).ok().flatten())
        .is_some_and(|held| held == value)
}

#[cfg(test)]
mod tests;
