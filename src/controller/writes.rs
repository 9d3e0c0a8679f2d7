//! Carries out the writes the loop of [`super::runtime`] spawns, one task
//! each, as `crate::lifecycle::decide` gave them: a removal by the owner
//! rules, the platform condition, the Events (contract:
//! controller.expiry-delete-pod, controller.expiry-delete-owner,
//! controller.expiry-owner-actions, controller.expiry-left-owned,
//! controller.platform-condition, controller.expiry-events). Every rule
//! and every word of an Event is the write's own data
//! (`crate::lifecycle::Write`); this file makes the calls, logs and counts.
//! Each reports whether it is done or must be retried.

use chrono::Utc;

use std::sync::Arc;

use super::actions::{Actions, Outcome, PodRef, Shutdown};
use super::fleet::Rules;
use super::metrics::ControllerMetrics;
use crate::lifecycle::{self, Event, Mark, Removal, Steps, Write};

/// What the loop shares with the tasks it spawns.
pub struct Shared {
    /// The watch's initial list is the streaming one (`initial_list`).
    pub streaming_list: bool,
    pub rules: Arc<Rules>,
    pub actions: Actions,
    pub metrics: Arc<ControllerMetrics>,
}

/// Runs one write; `(mark, true)` when it is done (or moot), `false` to
/// retry.
pub(super) async fn execute(shared: &Shared, pod: &PodRef, write: Write) -> (Mark, bool) {
    let (ns, name) = (&*pod.namespace, &*pod.name);
    let mark = write.mark();
    let ok = match write {
        Write::Expire {
            removal, at, steps, ..
        } => remove(shared, pod, &removal, *steps, Some(&at)).await,
        Write::RemoveUnschedulable { removal, steps } => {
            remove(shared, pod, &removal, *steps, None).await
        }
        Write::Report { message, event } => {
            match shared
                .actions
                .set_condition(pod, &shared.rules.condition_type, &message)
                .await
            {
                Ok(Outcome::Done) => {
                    tracing::info!(namespace = ns, pod = name, message = %message, "platform unschedulable");
                    shared.metrics.unschedulable();
                    record(shared, pod, &event, "not retried: the condition is set").await;
                    true
                }
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(namespace = ns, pod = name, error = %e, "cannot set the platform condition; retrying");
                    shared.metrics.api_error("patch-status");
                    false
                }
            }
        }
        Write::DriftEvent { drift, event } => {
            tracing::warn!(
                namespace = ns,
                pod = name,
                state = drift.state.as_str(),
                "sandbox drift"
            );
            record(shared, pod, &event, "recorded at the pod's next change").await
        }
        Write::InvalidExpiry { value, event } => {
            tracing::warn!(namespace = ns, pod = name, value = %value.escape_debug(), "invalid expires-at");
            record(shared, pod, &event, "retried").await
        }
    };
    (mark, ok)
}

/// A failed write's error, in words, with the operation it is counted
/// under.
fn failed<E: std::fmt::Display>(
    operation: &'static str,
) -> impl FnOnce(E) -> (String, &'static str) {
    move |e| (e.to_string(), operation)
}

/// Removes the pod by the owner rules (contract:
/// controller.expiry-delete-pod, controller.expiry-delete-owner,
/// controller.expiry-left-owned) as `steps` say, for the expiry `expired`
/// (`None`: removed as unschedulable); `false` when a write failed.
async fn remove(
    shared: &Shared,
    pod: &PodRef,
    removal: &Removal,
    steps: Steps,
    expired: Option<&str>,
) -> bool {
    let (ns, name) = (&*pod.namespace, &*pod.name);
    if let Some(recheck) = &steps.recheck {
        match shared.actions.current_pod(pod).await {
            Ok(current) if recheck.holds(current.as_ref(), &pod.uid, Utc::now()) => {}
            // Renewed since the cache saw it: the watch brings the renewal
            // and the loop decides again.
            Ok(_) => return false,
            Err(error) => {
                tracing::warn!(namespace = ns, pod = name, %error, "cannot read the pod; retrying");
                shared.metrics.api_error("get-pod");
                return false;
            }
        }
    }
    let mut kept = None;
    let actions = &shared.actions;
    let result = match removal {
        Removal::DeletePod => actions.delete_pod(pod).await.map_err(failed("delete-pod")),
        Removal::DeleteOwner(owner) => {
            let deleted = actions.delete_owner(pod, owner).await;
            deleted.map_err(failed("delete-owner"))
        }
        Removal::ShutdownOwner(owner) => actions
            .shutdown_owner(pod, owner, steps.shutdown_at)
            .await
            .map(|(outcome, shutdown)| {
                if let Shutdown::Kept(time) = shutdown {
                    kept = Some(time);
                }
                outcome
            })
            .map_err(failed("shutdown-owner")),
        Removal::SuspendOwner(owner) => {
            let suspended = actions.suspend_owner(pod, owner).await;
            suspended.map_err(failed("suspend-owner"))
        }
        Removal::LeaveOwned(_) => Ok(Outcome::Done),
    };
    let outcome = match result {
        Ok(outcome) => outcome,
        Err((error, operation)) => {
            tracing::warn!(namespace = ns, pod = name, %error, operation, "removal failed; retrying");
            shared.metrics.api_error(operation);
            return false;
        }
    };
    if outcome == Outcome::Stale && matches!(removal, Removal::DeletePod) {
        // Another version than the cache's (a renewal, a status update) or
        // another pod of the same name: decided again on the cache, which
        // the watch brings up to date.
        tracing::info!(
            namespace = ns,
            pod = name,
            "the pod changed since the decision; deciding again"
        );
        return false;
    }
    if outcome != Outcome::Done {
        // Gone already, or the owner's name now belongs to a new object:
        // nothing to do.
        tracing::info!(namespace = ns, pod = name, ?outcome, "removal moot");
        return true;
    }
    if let Some(at) = expired {
        let delay_ms = lifecycle::expiry::parse_expires_at(at)
            .map(|t| (Utc::now() - t).num_milliseconds())
            .unwrap_or_default();
        tracing::info!(
            namespace = ns,
            pod = name,
            action = removal.metric_label(),
            expires_at = at,
            delay_ms,
            "sandbox expired"
        );
        shared.metrics.expired(removal.metric_label());
    }
    if let Some(event) = steps.event {
        record(
            shared,
            pod,
            &event.recorded(kept.as_deref()),
            "not retried: the removal happened",
        )
        .await;
    }
    true
}

/// Records `event`; one that cannot be is logged with what happens `then`,
/// and counted. Whether it was recorded decides whether the write is done.
async fn record(shared: &Shared, pod: &PodRef, event: &Event, then: &str) -> bool {
    shared
        .actions
        .event(pod, event)
        .await
        .inspect_err(|e| {
            tracing::warn!(error = %e, reason = event.reason, then, "cannot record an Event");
            shared.metrics.api_error("create-event");
        })
        .is_ok()
}

#[cfg(test)]
pub(super) mod tests {
    // The writes to a `Sandbox` owner, with this module's stand-in apiserver.
    mod owners;

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::admin::metrics::Exposition;
    use crate::config::Config;
    use crate::lifecycle::SandboxPod;

    const FAILURE: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500}"#;
    pub(crate) const POD: &str =
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"team","uid":"u1"}}"#;

    /// How a stand-in answers: the request line (`PATCH /api/... HTTP/1.1`)
    /// and body in, status and body out.
    pub(crate) type Route = Arc<dyn Fn(&str, &str) -> (u16, String) + Send + Sync>;

    /// Reads one request (head and body) and answers it by `route`,
    /// closing after.
    async fn answer(mut stream: tokio::net::TcpStream, route: Route) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let (head_end, length) = loop {
            let Ok(n) = stream.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap_or(0));
                break (end + 4, length);
            }
        };
        while buf.len() < head_end + length {
            let Ok(n) = stream.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let head = String::from_utf8_lossy(&buf[..head_end]);
        let line = head.lines().next().unwrap_or_default();
        let (status, body) = route(line, &String::from_utf8_lossy(&buf[head_end..]));
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
    }

    /// What the loop shares, its client pointed at an apiserver stand-in
    /// that answers every DELETE with `delete` and everything else with
    /// `other` (status, body).
    pub(crate) async fn shared(delete: (u16, &'static str), other: (u16, &'static str)) -> Shared {
        shared_with(Arc::new(move |line: &str, _: &str| {
            let (status, body) = if line.starts_with("DELETE ") {
                delete
            } else {
                other
            };
            (status, body.to_owned())
        }))
        .await
    }

    /// What the loop shares, its client pointed at an apiserver stand-in
    /// that answers by `route`.
    pub(crate) async fn shared_with(route: Route) -> Shared {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, Arc::clone(&route)));
            }
        });
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        Shared {
            streaming_list: false,
            rules: Arc::new(Rules::new(Config::default(), None)),
            actions: Actions::new(client, "test".into()),
            metrics: Arc::new(ControllerMetrics::new()),
        }
    }

    pub(crate) fn pod() -> PodRef {
        let pod: SandboxPod = serde_json::from_value(json!({"metadata": {"name": "p",
            "namespace": "team", "uid": "u1", "resourceVersion": "1",
            "labels": {"opensandbox.io/id": "p"}}}))
        .unwrap();
        PodRef::of(&pod).unwrap()
    }

    /// The value of `series` in the controller's metrics.
    fn metric(shared: &Shared, series: &str) -> String {
        let text = shared.metrics.encode().unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    }

    pub(crate) fn expire() -> Write {
        Write::expire(
            Removal::DeletePod,
            "2026-01-01T00:00:00Z".into(),
            &Config::default(),
            Utc::now(),
        )
    }

    /// A write that fails is counted by operation and reported for a
    /// retry; an Event that cannot be recorded after a removal is counted
    /// but not retried (the removal happened).
    /// contract: controller.api-errors
    #[tokio::test]
    async fn failed_writes_are_counted_and_retried_and_a_lost_event_is_not() {
        let errors =
            |op: &str| format!("sandbox_webhook_controller_api_errors_total{{operation=\"{op}\"}}");
        let down = shared((500, FAILURE), (500, FAILURE)).await;
        let (_, done) = execute(&down, &pod(), expire()).await;
        assert!(!done, "a failed delete is retried");
        assert_eq!(metric(&down, &errors("delete-pod")), "1");
        assert_eq!(
            metric(
                &down,
                "sandbox_webhook_expired_total{action=\"deleted-pod\"}"
            ),
            "0"
        );

        let no_events = shared((200, POD), (500, FAILURE)).await;
        let (_, done) = execute(&no_events, &pod(), expire()).await;
        assert!(done, "the pod is deleted: the lost Event is not retried");
        assert_eq!(metric(&no_events, &errors("create-event")), "1");
        assert_eq!(metric(&no_events, &errors("delete-pod")), "0");
        assert_eq!(
            metric(
                &no_events,
                "sandbox_webhook_expired_total{action=\"deleted-pod\"}"
            ),
            "1"
        );
    }
}
