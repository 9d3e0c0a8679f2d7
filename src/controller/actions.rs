//! The controller's only writes to the apiserver: delete a pod or its
//! owner, tell an agent-sandbox `Sandbox` owner to shut down or suspend,
//! set the platform condition, record an Event. Each call is guarded
//! by the UID it was decided for, so a new object of the same name is never
//! hit by a stale decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::{Client, discovery};
use serde_json::json;
use thiserror::Error;

use crate::lifecycle::{self, Owner, SandboxPod, Uid, Version, whole_seconds_up};

/// The pod a write is for: the object (its UID, which every write is
/// conditioned on) and the version its decision was made on.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Uid,
    pub resource_version: Option<Version>,
}

impl PodRef {
    /// The pod as read from the apiserver; `None` without a name or UID.
    #[must_use]
    pub fn of(pod: &SandboxPod) -> Option<Self> {
        Some(PodRef {
            namespace: pod.namespace().into(),
            name: pod.metadata.name.as_deref()?.into(),
            uid: Uid::new(pod.metadata.uid.as_deref()?),
            resource_version: pod.metadata.resource_version.as_deref().map(Version::new),
        })
    }
}

/// `reportingController` of every Event (a qualified name, as the Events API
/// requires).
pub const REPORTING_CONTROLLER: &str = "opensandbox.io/sandbox-webhook-controller";

/// The Events API refuses a note over 1 kB.
const MAX_NOTE_BYTES: usize = 1024;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ActionError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
    #[error("the owner's kind {kind} ({api_version}) is not served by the apiserver: {source}")]
    Discovery {
        kind: String,
        api_version: String,
        #[source]
        source: kube::Error,
    },
}

/// How a write ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// The object is already gone (404).
    Gone,
    /// A precondition failed (409): the object now has another UID (a new
    /// object of the same name) or, for a pod, a newer version than the
    /// decision was made on.
    Stale,
}

fn outcome<T>(result: Result<T, kube::Error>) -> Result<Outcome, kube::Error> {
    match result {
        Ok(_) => Ok(Outcome::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Outcome::Gone),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Stale),
        Err(e) => Err(e),
    }
}

pub struct Actions {
    client: Client,
    /// `reportingInstance`: this replica's identity.
    instance: String,
    /// Owner kinds resolved through discovery, once each.
    owner_resources: Mutex<HashMap<(String, String), ApiResource>>,
}

impl Actions {
    #[must_use]
    pub fn new(client: Client, instance: String) -> Self {
        Actions {
            client,
            instance,
            owner_resources: Mutex::new(HashMap::new()),
        }
    }

    fn pods(&self, pod: &PodRef) -> Api<SandboxPod> {
        Api::namespaced(self.client.clone(), &pod.namespace)
    }

    /// Deletes the pod only if it is still the object and the version the
    /// decision was made on (UID and resourceVersion preconditions): a
    /// renewal of `expires-at` that the cache has not seen yet makes the
    /// delete fail rather than remove the pod before its new time.
    ///
    /// # Errors
    /// Any API error but 404 and 409, which are [`Outcome::Gone`] and
    /// [`Outcome::Stale`].
    pub async fn delete_pod(&self, pod: &PodRef) -> Result<Outcome, kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.to_string()),
                resource_version: pod.resource_version.as_ref().map(ToString::to_string),
            }),
            ..DeleteParams::default()
        };
        outcome(self.pods(pod).delete(&pod.name, &params).await)
    }

    /// Deletes the pod's controller owner (propagation Background, owner UID
    /// precondition); its kind's resource is found through discovery.
    ///
    /// # Errors
    /// Discovery failing to name the owner's resource, or an API error but
    /// 404 and 409 (see [`Actions::delete_pod`]).
    pub async fn delete_owner(&self, pod: &PodRef, owner: &Owner) -> Result<Outcome, ActionError> {
        let api = self.owner_api(pod, owner).await?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(owner.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        Ok(outcome(api.delete(&owner.name, &params).await)?)
    }

    /// Tells the pod's agent-sandbox `Sandbox` owner to shut down at `at`:
    /// merge-patches `spec.shutdownTime`, unless the Sandbox already has
    /// one at or before `at` (then [`Shutdown::Kept`] with it). The Sandbox
    /// is read through a patch that changes nothing but checks its UID (the
    /// RBAC holds `patch` on sandboxes, not `get`), and written with its UID
    /// and `resourceVersion` as preconditions, so a concurrent change of
    /// its shutdown time is never overwritten.
    ///
    /// # Errors
    /// Discovery failing to name the owner's resource, or an API error but
    /// 404 and 409 (see [`Actions::delete_pod`]).
    pub async fn shutdown_owner(
        &self,
        pod: &PodRef,
        owner: &Owner,
        at: DateTime<Utc>,
    ) -> Result<(Outcome, Shutdown), ActionError> {
        let api = self.owner_api(pod, owner).await?;
        let uid = owner.uid.to_string();
        let read = json!({"metadata": {"uid": uid}});
        let current = match api
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&read))
            .await
        {
            Ok(current) => current,
            Err(e) => return Ok((outcome::<()>(Err(e))?, Shutdown::Set)),
        };
        let existing = current
            .data
            .pointer("/spec/shutdownTime")
            .and_then(serde_json::Value::as_str);
        if let Some(existing) = existing
            && DateTime::parse_from_rfc3339(existing).is_ok_and(|t| t <= at)
        {
            return Ok((Outcome::Done, Shutdown::Kept(existing.to_owned())));
        }
        let write = json!({
            "metadata": {"uid": uid, "resourceVersion": current.metadata.resource_version},
            "spec": {"shutdownTime": whole_seconds_up(at)},
        });
        let result = api
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&write))
            .await;
        Ok((outcome(result)?, Shutdown::Set))
    }

    /// Tells the pod's agent-sandbox `Sandbox` owner to suspend: merge-patches
    /// `spec.operatingMode: Suspended`, the owner's UID as precondition.
    ///
    /// # Errors
    /// Discovery failing to name the owner's resource, or an API error but
    /// 404 and 409 (see [`Actions::delete_pod`]).
    pub async fn suspend_owner(&self, pod: &PodRef, owner: &Owner) -> Result<Outcome, ActionError> {
        let api = self.owner_api(pod, owner).await?;
        let patch = json!({
            "metadata": {"uid": owner.uid.to_string()},
            "spec": {"operatingMode": "Suspended"},
        });
        let result = api
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        Ok(outcome(result)?)
    }

    async fn owner_api(
        &self,
        pod: &PodRef,
        owner: &Owner,
    ) -> Result<Api<DynamicObject>, ActionError> {
        let resource = self.owner_resource(owner).await?;
        Ok(Api::namespaced_with(
            self.client.clone(),
            &pod.namespace,
            &resource,
        ))
    }

    /// The pod as the apiserver has it now; `None` when it is gone.
    ///
    /// # Errors
    /// Any API error but 404.
    pub async fn current_pod(&self, pod: &PodRef) -> Result<Option<SandboxPod>, kube::Error> {
        self.pods(pod).get_opt(&pod.name).await
    }

    async fn owner_resource(&self, owner: &Owner) -> Result<ApiResource, ActionError> {
        let key = (owner.api_version.to_string(), owner.kind.to_string());
        if let Some(found) = self.cached(&key) {
            return Ok(found);
        }
        let version = owner
            .api_version
            .rsplit_once('/')
            .map_or(&*owner.api_version, |(_, v)| v);
        let gvk = GroupVersionKind::gvk(owner.group(), version, &owner.kind);
        let (resource, _) = discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| ActionError::Discovery {
                kind: owner.kind.to_string(),
                api_version: owner.api_version.to_string(),
                source,
            })?;
        if let Ok(mut cache) = self.owner_resources.lock() {
            cache.insert(key, resource.clone());
        }
        Ok(resource)
    }

    fn cached(&self, key: &(String, String)) -> Option<ApiResource> {
        self.owner_resources.lock().ok()?.get(key).cloned()
    }

    /// Sets the controller's condition through the status subresource. The
    /// patch carries the pod's UID, which the apiserver checks.
    ///
    /// # Errors
    /// Any API error but 404 and 409, which are [`Outcome::Gone`] and
    /// [`Outcome::Stale`].
    pub async fn set_condition(
        &self,
        pod: &PodRef,
        condition_type: &str,
        message: &str,
    ) -> Result<Outcome, kube::Error> {
        let patch = json!({
            "metadata": {"uid": pod.uid.to_string()},
            "status": {"conditions": [{
                "type": condition_type,
                "status": "True",
                "reason": "PlatformUnschedulable",
                "message": message,
                "lastTransitionTime": Time(Timestamp::now()),
            }]},
        });
        outcome(
            self.pods(pod)
                .patch_status(
                    &pod.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await,
        )
    }

    /// Records an `events.k8s.io/v1` Event about the pod. Create only: the
    /// controller emits each Event once, so it never needs to patch a series.
    ///
    /// # Errors
    /// The apiserver's error, whatever it is.
    pub async fn event(&self, pod: &PodRef, event: &lifecycle::Event) -> Result<(), kube::Error> {
        let lifecycle::Event {
            type_,
            reason,
            action,
            note,
        } = event;
        let now = Timestamp::now();
        let name = &*pod.name;
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(pod.namespace.to_string()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some((*action).to_owned()),
            reason: Some((*reason).to_owned()),
            note: Some(truncate(note, MAX_NOTE_BYTES).to_owned()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.to_owned()),
                namespace: Some(pod.namespace.to_string()),
                uid: Some(pod.uid.to_string()),
                ..ObjectReference::default()
            }),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(truncate(&self.instance, 128).to_owned()),
            type_: Some(
                match type_ {
                    lifecycle::EventType::Normal => "Normal",
                    lifecycle::EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &pod.namespace);
        api.create(&PostParams::default(), &event).await.map(|_| ())
    }
}

/// What a shutdown told to a `Sandbox` did to its `spec.shutdownTime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shutdown {
    /// Set to the pod's expiry.
    Set,
    /// Left: it was this time, at or before the pod's expiry, already.
    Kept(String),
}

/// At most `max` bytes, cut at a character boundary.
#[must_use]
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shutdown_time_is_whole_seconds_never_early() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(
            whole_seconds_up(at("2026-01-01T00:00:00Z")),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            whole_seconds_up(at("2026-01-01T00:00:00.2+01:00")),
            "2025-12-31T23:00:01Z"
        );
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("aé", 2), "a");
    }
}
