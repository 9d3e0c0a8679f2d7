//! What every scenario of a whole-cluster suite (`cluster_e2e`,
//! `node_e2e`) gets from the cluster `cluster.sh` started: a client, the
//! suite's working directory, the cluster's variables (`cluster.env`) and
//! one namespace per scenario. Each suite's `Env` holds one and derefs to
//! it, adding what only that suite needs.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;

use crate::cluster::ScenarioNamespaces;
use crate::processes::{Cluster, Result, Vars};

pub struct ClusterEnv {
    pub client: Client,
    pub work: PathBuf,
    /// `cluster.env` of the `cluster.sh` command that started the cluster.
    pub vars: Vars,
    namespaces: ScenarioNamespaces,
}

impl ClusterEnv {
    /// A client of `cluster` and its variables; the scenarios' namespaces
    /// are `namespaces`.
    pub async fn new(
        work: &Path,
        cluster: &Cluster,
        namespaces: ScenarioNamespaces,
    ) -> Result<Self> {
        Ok(ClusterEnv {
            client: cluster.client().await?,
            work: work.to_owned(),
            vars: cluster.vars()?,
            namespaces,
        })
    }

    pub fn var(&self, key: &str) -> Result<&str> {
        self.vars.get(key)
    }

    pub fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// The scenario's namespace `<prefix>-<id>` (with `labels`), once its
    /// `default` `ServiceAccount` exists.
    pub async fn namespace(&self, id: &str, labels: &[(&str, &str)]) -> Result<String> {
        self.namespaces.create(&self.client, id, labels).await
    }

    /// Deletes the scenario's namespace and waits until it is gone.
    pub async fn clean_up(&self, id: &str) -> Result<()> {
        self.namespaces.delete(&self.client, id).await
    }
}
