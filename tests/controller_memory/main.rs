//! The controller's memory per cached sandbox: the leader's
//! whole state (`controller::fleet::Fleet`: the cache, the owner index, a
//! timer per pod) filled with a fleet of realistic pods, decoded from the
//! JSON the apiserver sends, exactly as the watch feeds it, and the heap it
//! holds counted by a global allocator. The count does not depend on the
//! machine or its load: the same pods give the same bytes on every run.
//!
//! Each pod carries its injection record, which the drift audit reads
//! (half the fleet current, a quarter stale, a quarter not injected), and
//! the fleet holds its drift state and whether its Event was recorded.
//!
//! The budget is 1 KiB per pod, so that 100,000 sandboxes fit in the
//! chart's default memory limit with room to spare (docs/performance.md,
//! "Controller memory"). The cache this replaced (kube-runtime's reflector
//! store of stripped `ObjectMeta`s, and maps keyed by `ObjectRef`s and UID
//! strings) held 6,828 bytes a pod of the same fleet and fails this test
//! (run against it on branch `i33-controller-old-slope`).

use common::{alloc, fleet};

use std::sync::Arc;

use kube::runtime::watcher::Event;
use sandbox_webhook::config::Config;
use sandbox_webhook::controller::fleet::{Done, Fleet, Rules};
use sandbox_webhook::lifecycle::SandboxPod;
use sandbox_webhook::mutate::injection_record;

use alloc::Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

/// The budget per cached pod.
const BUDGET: isize = 1024;
/// Pods in the fleet: enough that the fixed costs are lost in the slope
/// (`CONTROLLER_MEMORY_PODS` measures another size).
const PODS: usize = 20_000;

/// Pod `n` as the watch decodes it from the apiserver's JSON. The drift
/// audit finds half the fleet current, a quarter stale and a quarter not
/// injected, so half of it has a drift Event to record.
fn decoded(n: usize, first_expiry: i64) -> SandboxPod {
    let current = injection_record(&Config::default(), true, None).value;
    let record = match n % 4 {
        1 => Some(fleet::STALE_RECORD),
        2 => None,
        _ => Some(current.as_str()),
    };
    serde_json::from_str(&fleet::pod_json_with(n, first_expiry, record)).expect("a pod")
}

/// Records every drift Event the fleet starts, until none is left.
fn record_drift_events(fleet: &mut Fleet) -> usize {
    let mut recorded = 0;
    loop {
        let started = fleet.take_started();
        if started.is_empty() {
            return recorded;
        }
        for start in started {
            recorded += 1;
            fleet.finished(Done {
                key: start.key,
                uid: start.pod.uid,
                mark: start.write.mark(),
                ok: true,
                version: start.pod.resource_version,
            });
        }
    }
}

fn per_pod(bytes: isize, pods: usize) -> isize {
    bytes / isize::try_from(pods).expect("small")
}

/// Fails the test unless `held` bytes over `pods` pods is within
/// [`BUDGET`] per pod; the failure says `grew_to` and the bytes.
#[track_caller]
fn assert_within_budget(held: isize, pods: usize, grew_to: &str) {
    assert!(per_pod(held, pods) <= BUDGET, "{grew_to} {held} bytes");
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
        // The drift audit's counts (contract: drift.metrics), and half the
        // fleet waiting for its drift Event.
        assert_eq!(
            fleet.drift_counts(),
            [pods / 2, pods / 4, pods / 4, 0, 0],
            "current, stale, not-injected, server-completed, opted-out"
        );
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
        // Every drift Event recorded: each pod keeps that it was, once.
        let recorded = record_drift_events(&mut fleet);
        assert_eq!(recorded, pods / 2, "one drift Event per stale or escaped pod");
        let reported = Counting::held();
        eprintln!(
            "after {recorded} drift Events: {reported} bytes, {} per pod",
            per_pod(reported, pods)
        );
        assert_within_budget(reported, pods, "the drift audit grew the cache to");
        assert!(
            average <= BUDGET && slope <= BUDGET,
            "{average} bytes per cached pod ({slope} at the margin), over the budget of {BUDGET}"
        );
        // The list itself is never held: one decoded pod at a time.
        assert_within_budget(peak, pods, "filling the cache peaked at");
        assert_within_budget(updated, pods, "updates grew the cache to");
        // And a relist that no longer finds them frees them all.
        fleet.on_event(Event::Init);
        fleet.on_event(Event::InitDone);
        assert_eq!((fleet.cached(), fleet.timers()), (0, 0));
        let left = Counting::held();
        eprintln!("after a relist that found none: {left} bytes");
    });
}
