//! The Kubernetes helpers of the end-to-end suites: running the cluster's
//! own tools (kubectl, helm, ctr), waiting on what its controllers do, a
//! pod's conditions, the Events about an object, and one namespace per
//! scenario, waited for at both ends.

use std::fmt::Debug;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, PodCondition, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Map, Value, json};

use crate::processes::{Result, check};

/// Runs `command` with `stdin` piped in; its stdout, or an error with its
/// stderr when it fails.
pub fn run(command: &mut Command, stdin: &str) -> Result<String> {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    check(
        out.status.success(),
        format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    )?;
    Ok(String::from_utf8(out.stdout)?)
}

/// The parameters of a server-side dry-run create: it passes admission
/// (the webhook runs) and nothing is stored.
pub fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

/// Polls `probe` every 100 ms until it gives `Some`, for at most `timeout`.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe().await? {
            return Ok(found);
        }
        check(
            Instant::now() < deadline,
            format!("waited {timeout:?} for {what}"),
        )?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`wait_for`] whose `probe` also notes what it last saw (its argument):
/// a timeout's error then shows that note, after `seen`.
pub async fn wait_noting<T>(
    what: &str,
    timeout: Duration,
    seen: &str,
    mut probe: impl AsyncFnMut(&mut String) -> Result<Option<T>>,
) -> Result<T> {
    let mut last = String::new();
    let found = wait_for(what, timeout, async || probe(&mut last).await).await;
    found.map_err(|e| format!("{e}; {seen}:\n{last}").into())
}

/// Object `name` of `api` (a pod, a node, a Sandbox) once `seen` finds in
/// it what `what` names, and what it found; an error after `timeout`.
pub async fn wait_for_object<K, T>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    seen: impl Fn(&K) -> Option<T>,
) -> Result<(K, T)>
where
    K: Clone + DeserializeOwned + Debug,
{
    wait_for(&format!("{what} on {name}"), timeout, async || {
        let object = api.get(name).await?;
        Ok(seen(&object).map(|found| (object, found)))
    })
    .await
}

/// The pods of `pods` once their list satisfies `done` (`what` names
/// that); an error after `timeout`.
pub async fn wait_for_pods(
    pods: &Api<Pod>,
    what: &str,
    timeout: Duration,
    done: impl Fn(&[Pod]) -> bool,
) -> Result<Vec<Pod>> {
    wait_for(what, timeout, async || {
        let list = pods.list(&ListParams::default()).await?.items;
        Ok(done(&list).then_some(list))
    })
    .await
}

/// Condition `type_` of pod `p`'s status, when it has one.
pub fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether pod `p` is Ready (its condition says so).
pub fn is_ready(p: &Pod) -> bool {
    condition(p, "Ready").is_some_and(|c| c.status == "True")
}

/// The Events in `ns` about object `name` with `reason`.
pub async fn events_about(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect())
}

/// The one Event in `ns` about `name` with `reason`, waiting up to
/// `timeout` for it; an error when there is none or more than one.
pub async fn the_event(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<Event> {
    wait_for_one(
        &format!("{reason} Events about {name}"),
        timeout,
        async || events_about(client, ns, name, reason).await,
    )
    .await
}

/// Polls `probe` until it finds anything, for at most `timeout`: the one
/// thing it found, or an error that says how many `what` it found.
pub async fn wait_for_one<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Result<Vec<T>>,
) -> Result<T> {
    let found = wait_for(what, timeout, async || {
        let found = probe().await?;
        Ok((!found.is_empty()).then_some(found))
    })
    .await?;
    the_only(found, what)
}

/// The one item of `items`; an error that says how many `what` there
/// were otherwise.
pub fn the_only<T>(mut items: Vec<T>, what: &str) -> Result<T> {
    check_count(&items, 1, what)?;
    Ok(items.remove(0))
}

/// An error that says how many `what` there were unless `items` holds
/// `want` of them.
pub fn check_count<T>(items: &[T], want: usize, what: &str) -> Result<()> {
    check(
        items.len() == want,
        format!("{} {what}, expected {want}", items.len()),
    )
}

/// Namespaces of the whole-cluster suites carry this label, with the
/// scenario as value.
pub const SCOPE_LABEL: &str = "sandbox-webhook-e2e/scenario";

/// The namespaces a suite gives its scenarios: scenario `id`'s is
/// `<prefix>-<id>` (`_` as `-`), labelled [`SCOPE_LABEL`]`=id`, and deleted
/// after it within `cleanup`.
pub struct ScenarioNamespaces {
    pub prefix: &'static str,
    /// How long deleting one may take: what is in it goes first.
    pub cleanup: Duration,
}

impl ScenarioNamespaces {
    pub fn name(&self, id: &str) -> String {
        format!("{}-{}", self.prefix, id.replace('_', "-"))
    }

    /// Creates scenario `id`'s namespace with `labels` (see
    /// [`create_namespace`]); its name.
    pub async fn create(
        &self,
        client: &Client,
        id: &str,
        labels: &[(&str, &str)],
    ) -> Result<String> {
        let name = self.name(id);
        let mut all = Map::new();
        all.insert(SCOPE_LABEL.into(), json!(id.replace('_', "-")));
        for (k, v) in labels {
            all.insert((*k).into(), json!(v));
        }
        create_namespace(client, &name, all).await?;
        Ok(name)
    }

    /// Deletes scenario `id`'s namespace and waits until it is gone.
    pub async fn delete(&self, client: &Client, id: &str) -> Result<()> {
        delete_namespace(client, &self.name(id), self.cleanup).await
    }
}

/// Creates namespace `name` with `labels`, and returns once its `default`
/// `ServiceAccount` exists: the `ServiceAccount` admission plugin refuses
/// pods before the controller-manager has made it.
pub async fn create_namespace(
    client: &Client,
    name: &str,
    labels: Map<String, Value>,
) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels},
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    wait_for(
        &format!("the default ServiceAccount of {name}"),
        Duration::from_secs(30),
        async || Ok(sas.get_opt("default").await?.map(|_| ())),
    )
    .await
}

/// Deletes namespace `name` (when it exists) and waits until it is gone:
/// the namespace controller removes what is in it, the nodes the pods.
pub async fn delete_namespace(client: &Client, name: &str, timeout: Duration) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await?.is_none() {
        return Ok(());
    }
    api.delete(name, &DeleteParams::default()).await?;
    wait_for(
        &format!("namespace {name} to finish terminating"),
        timeout,
        async || Ok(api.get_opt(name).await?.is_none().then_some(())),
    )
    .await
}
