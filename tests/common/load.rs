//! Sandbox creates at a steady rate while something else happens (a
//! rollout, a certificate rotation), each on its own task, and what the
//! apiserver answered: with `failurePolicy: Fail` every refusal is a create
//! that the webhook's unavailability cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use tokio::sync::Mutex;

use crate::processes::Result;

/// What the load saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: usize,
    pub refused: Vec<String>,
}

impl Tally {
    pub fn total(&self) -> usize {
        self.ok + self.refused.len()
    }

    /// `Err` with the count and the first refusal unless none was refused.
    pub fn none_refused(&self) -> Result<()> {
        crate::processes::check(
            self.refused.is_empty(),
            format!(
                "{} creates refused, first: {:?}",
                self.refused.len(),
                self.refused.first()
            ),
        )
    }
}

/// A running load; [`Load::finish`] or [`Load::stop`] gives its tally.
pub struct Load {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<Tally>>,
}

impl Load {
    /// `rate` creates a second of `make(i)` (i = 0, 1, ...), until `limit`
    /// creates (when given) or until stopped.
    pub fn start(
        pods: Api<Pod>,
        rate: u32,
        limit: Option<u32>,
        make: impl Fn(u32) -> Result<Pod> + Send + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(generate(pods, rate, limit, make, Arc::clone(&stop)));
        Load { stop, task }
    }

    /// Waits for the `limit` creates and their answers.
    pub async fn finish(self) -> Result<Tally> {
        self.task.await?
    }

    /// Stops making new creates and waits for the answers of those made.
    pub async fn stop(self) -> Result<Tally> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

async fn generate(
    pods: Api<Pod>,
    rate: u32,
    limit: Option<u32>,
    make: impl Fn(u32) -> Result<Pod>,
    stop: Arc<AtomicBool>,
) -> Result<Tally> {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    let mut tasks = Vec::new();
    let mut i = 0;
    while limit.is_none_or(|n| i < n) && !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let pod = make(i)?;
        let (pods, tally) = (pods.clone(), Arc::clone(&tally));
        tasks.push(tokio::spawn(async move {
            let result = pods.create(&PostParams::default(), &pod).await;
            let mut tally = tally.lock().await;
            match result {
                Ok(_) => tally.ok += 1,
                Err(e) => tally.refused.push(e.to_string()),
            }
        }));
        i += 1;
    }
    for task in tasks {
        task.await?;
    }
    let mut tally = tally.lock().await;
    Ok(std::mem::take(&mut *tally))
}
