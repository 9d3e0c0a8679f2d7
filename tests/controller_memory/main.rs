//! The controller's memory per cached sandbox: the leader's
//! whole state (`controller::fleet::Fleet`: the cache, the owner index, a
//! timer per pod) filled with a fleet of realistic pods, decoded from the
//! JSON the apiserver sends, exactly as the watch feeds it, and the heap it
//! holds counted by a global allocator. The count does not depend on the
//! machine or its load: the same pods give the same bytes on every run.
//!
//! The budget is 1 KiB per pod, so that 100,000 sandboxes fit in the
//! chart's default memory limit with room to spare (docs/performance.md,
//! "Controller memory"). The cache this replaced (kube-runtime's reflector
//! store of stripped `ObjectMeta`s, and maps keyed by `ObjectRef`s and UID
//! strings) held 6,828 bytes a pod of the same fleet and fails this test
//! (run against it on branch `i33-controller-old-slope`).

#[path = "../common/alloc.rs"]
mod alloc;
#[path = "../common/fleet.rs"]
mod fleet;

use std::sync::Arc;

use kube::runtime::watcher::Event;
use sandbox_webhook::config::Config;
use sandbox_webhook::controller::fleet::{Fleet, Rules};
use sandbox_webhook::lifecycle::SandboxPod;

use alloc::Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

/// The budget per cached pod.
const BUDGET: isize = 1024;
/// Pods in the fleet: enough that the fixed costs are lost in the slope
/// (`CONTROLLER_MEMORY_PODS` measures another size).
const PODS: usize = 20_000;

/// Pod `n` as the watch decodes it from the apiserver's JSON.
fn decoded(n: usize, first_expiry: i64) -> SandboxPod {
    serde_json::from_str(&fleet::pod_json(n, first_expiry)).expect("a pod")
}

fn per_pod(bytes: isize, pods: usize) -> isize {
    bytes / isize::try_from(pods).expect("small")
}

/// contract: controller.memory
#[test]
fn a_cached_sandbox_costs_at_most_1_kib() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    // The timers need the runtime's clock; everything runs on this thread.
    let pods = std::env::var("CONTROLLER_MEMORY_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PODS);
    runtime.block_on(async {
        let rules = Arc::new(Rules::new(Config::default(), None));
        let mut fleet = Fleet::new(rules);
        // An hour ahead: every pod arms a timer, none is due.
        let first_expiry = chrono::Utc::now().timestamp() + 3600;
        Counting::start();
        // The streaming list, as the watch delivers it at start-up.
        fleet.on_event(Event::Init);
        let mut half = 0;
        for n in 0..pods {
            fleet.on_event(Event::InitApply(decoded(n, first_expiry)));
            if n + 1 == pods / 2 {
                half = Counting::held();
            }
        }
        fleet.on_event(Event::InitDone);
        let full = Counting::held();
        let peak = Counting::peak();
        assert_eq!((fleet.cached(), fleet.timers()), (pods, pods));
        let average = per_pod(full, pods);
        let slope = per_pod(full - half, pods - pods / 2);
        eprintln!(
            "{pods} cached sandboxes hold {full} bytes: {average} bytes per pod; {slope} bytes per pod from {} to {pods}; peak while filling {peak} bytes ({} per pod)",
            pods / 2,
            per_pod(peak, pods)
        );
        // Then every pod changes once (a status update, a renewal), as
        // the watch brings them: the cache does not grow with updates.
        for n in 0..pods {
            let mut pod = decoded(n, first_expiry + 60);
            pod.metadata.resource_version = Some(format!("{}", 9_000_000 + n));
            fleet.on_event(Event::Apply(pod));
        }
        let updated = Counting::held();
        eprintln!(
            "after one update each: {updated} bytes, {} per pod",
            per_pod(updated, pods)
        );
        assert!(
            average <= BUDGET && slope <= BUDGET,
            "{average} bytes per cached pod ({slope} at the margin), over the budget of {BUDGET}"
        );
        // The list itself is never held: one decoded pod at a time.
        assert!(
            per_pod(peak, pods) <= BUDGET,
            "filling the cache peaked at {peak} bytes"
        );
        assert!(
            per_pod(updated, pods) <= BUDGET,
            "updates grew the cache to {updated} bytes"
        );
        // And a relist that no longer finds them frees them all.
        fleet.on_event(Event::Init);
        fleet.on_event(Event::InitDone);
        assert_eq!((fleet.cached(), fleet.timers()), (0, 0));
        let left = Counting::held();
        eprintln!("after a relist that found none: {left} bytes");
    });
}
