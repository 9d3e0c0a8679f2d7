//! `scale watch`: what filling the controller's cache costs with each kind
//! of watch the controller could use (issue 33, "measured before you
//! choose"): a streaming list (`sendInitialEvents`) of every sandbox pod,
//! decoded as the controller decodes them (`lifecycle::SandboxPod`, which
//! skips containers, managedFields and the rest of the status), against
//! the same list as metadata only (`PartialObjectMetadata`, kube's
//! `Api<PartialObjectMeta<Pod>>`, what was `metadata_watcher`: no spec or
//! status). Each is timed
//! from the request to the end of the initial events, in wall and CPU
//! seconds of this process, twice, alternating.

use std::time::Instant;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use sandbox_webhook::lifecycle::SandboxPod;

use super::Result;

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &raw mut usage);
        usage
    };
    #[expect(clippy::cast_precision_loss, reason = "CPU seconds are far below 2^52")]
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Objects until the end of the initial events; (objects, wall s, CPU s).
async fn initial_list<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>>,
) -> Result<(u64, f64, f64)> {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let mut events = std::pin::pin!(events);
    let mut objects = 0;
    while let Some(event) = events.next().await {
        match event? {
            Event::InitApply(_) => objects += 1,
            Event::InitDone => break,
            _ => {}
        }
    }
    Ok((objects, wall.elapsed().as_secs_f64(), cpu_seconds() - cpu))
}

pub async fn watch_costs(client: Client) -> Result<()> {
    let config = watcher::Config::default()
        .labels("opensandbox.io/id")
        .streaming_lists();
    for round in 1..=2 {
        let (n, wall, cpu) = initial_list(watcher::watcher(
            Api::<PartialObjectMeta<Pod>>::all(client.clone()),
            config.clone(),
        ))
        .await?;
        println!(
            "streaming list, metadata only (PartialObjectMetadata), round {round}: {n} pods in {wall:.1} s, {cpu:.1} CPU s"
        );
        let (n, wall, cpu) = initial_list(watcher::watcher(
            Api::<SandboxPod>::all(client.clone()),
            config.clone(),
        ))
        .await?;
        println!(
            "streaming list, whole pods decoded as the controller does (SandboxPod), round {round}: {n} pods in {wall:.1} s, {cpu:.1} CPU s"
        );
    }
    Ok(())
}
