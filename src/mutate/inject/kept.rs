//! What of a pod's own copy of the webhook's sidecar is kept as it is
//! although the webhook would write it otherwise (contract:
//! egress.rules-as-values, egress.classic-kept), and the volumes `layout`
//! checks. `layout` decides with these; everything else it still compares
//! field by field (`same`).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use smallvec::SmallVec;

use super::egress::Sidecar;
use super::execd::EmptyDirVolume;
use super::held;
use super::owned::{At, List, Owned};
use super::same;
use super::upstream::CaVolume;
use crate::mutate::read::lists::{VolumeAt, Volumes};
use crate::mutate::read::pod::SpecView;

/// A volume the webhook injects.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub(crate) enum Volume<'a> {
    EmptyDir(&'static EmptyDirVolume),
    UpstreamCa(CaVolume<'a>),
}

impl Volume<'_> {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Volume::EmptyDir(v) => v.name(),
            Volume::UpstreamCa(v) => v.name(),
        }
    }
}

/// The volumes the webhook injects into this pod (the binary volume, with
/// isolated sessions theirs, with the upstream proxy's CA bundle its
/// Secret's), each with where the pod holds one of that name.
pub(crate) fn injected_volumes<'a>(
    volumes: Option<&Volumes<'_>>,
    isolation: bool,
    ca: Option<CaVolume<'a>>,
) -> SmallVec<[(Volume<'a>, Option<VolumeAt>); 3]> {
    let mut out = SmallVec::new();
    out.push((
        Volume::EmptyDir(&EmptyDirVolume::BIN),
        volumes.and_then(|v| v.bin),
    ));
    if isolation {
        out.push((
            Volume::EmptyDir(&EmptyDirVolume::ISOLATION),
            volumes.and_then(|v| v.isolation),
        ));
    }
    if let Some(ca) = ca {
        out.push((Volume::UpstreamCa(ca), volumes.and_then(|v| v.upstream_ca)));
    }
    out
}

/// The sidecar as the webhook injects it now, to check a held one against:
/// with the held rules text where it is the same policy (contract:
/// egress.rules-as-values), so that text is kept as it is.
pub(crate) fn expected_against(sidecar: &Sidecar<'_>, held: Option<&RawValue>) -> Value {
    // Only a broken `Serialize` impl could fail; an unequal `Null` then
    // has the held one replaced.
    let mut expected = serde_json::to_value(sidecar).unwrap_or(Value::Null);
    let held = held.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
    let rules = held.as_ref().and_then(held::rules);
    if let Some(rules) = rules
        && rules != sidecar.rules()
        && held::same_rules(rules, sidecar.rules())
        && let Some(entry) = expected.pointer_mut("/env/0/value")
    {
        // The rules are the first entry (contract: egress.env-order).
        *entry = Value::from(rules);
    }
    expected
}

/// Whether a held classic sidecar stays where it is although the webhook
/// would place a native one (contract: egress.classic-kept): it is exactly
/// the webhook's classic sidecar, and the pod runs no init container of its
/// own, so nothing the pod brings starts before it that would start after a
/// native one. That is the layout of OpenSandbox's server, whose pods keep
/// their sidecar byte for byte.
pub(crate) fn classic_kept(
    spec: &SpecView<'_>,
    owned: Owned,
    at: At,
    expected: &Value,
    held: Option<&RawValue>,
) -> bool {
    let others = spec.init_containers().len() - usize::from(owned.installer.is_some());
    if at.list != List::Main || others > 0 {
        return false;
    }
    let mut classic = expected.clone();
    if let Some(c) = classic.as_object_mut() {
        c.remove("restartPolicy");
    }
    held.is_some_and(|raw| same::container(raw, &classic).is_ok())
}
