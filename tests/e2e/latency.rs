//! What the webhook adds to a pod create, measured against the same
//! apiserver without it (printed, not asserted: the machine is shared).

use std::time::{Duration, Instant};

use kube::api::PostParams;

use crate::Result;
use crate::env::{Env, Scope, check, has_init};
use common::pods::SandboxPod;
use common::stats::percentile;

async fn timed_creates(scope: &Scope<'_>, prefix: &str, n: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let pod = SandboxPod::new(&format!("{prefix}-{i}"))
            .annotation("timeout", "1h")
            .pod();
        let t = Instant::now();
        scope.pods().create(&PostParams::default(), &pod).await?;
        out.push(t.elapsed());
    }
    out.sort();
    Ok(out)
}

pub async fn latency_added_by_the_webhook(env: &Env, id: &str) -> Result<()> {
    const N: usize = 200;
    let scope = env.scope(id).await?;
    // Warm both paths first (connections, caches).
    timed_creates(&scope, "warm-with", 20).await?;
    let with = timed_creates(&scope, "with", N).await?;
    scope.unregister().await?;
    scope.wait_active(&scope.ns, false).await?;
    timed_creates(&scope, "warm-without", 20).await?;
    let without = timed_creates(&scope, "without", N).await?;
    let (m1, m0) = (percentile(&with, 0.5), percentile(&without, 0.5));
    let (p1, p0) = (percentile(&with, 0.99), percentile(&without, 0.99));
    println!(
        "latency: {N} pod creates with the webhook vs {N} without: median {:.2} ms vs {:.2} ms (ratio {:.2}), p99 {:.2} ms vs {:.2} ms (ratio {:.2})",
        m1.as_secs_f64() * 1e3,
        m0.as_secs_f64() * 1e3,
        m1.as_secs_f64() / m0.as_secs_f64(),
        p1.as_secs_f64() * 1e3,
        p0.as_secs_f64() * 1e3,
        p1.as_secs_f64() / p0.as_secs_f64(),
    );
    let stored = scope.pods().get("with-0").await?;
    check(
        has_init(&stored, "execd-installer"),
        "the timed pods went through the webhook",
    )?;
    let stored = scope.pods().get("without-0").await?;
    check(
        !has_init(&stored, "execd-installer"),
        "the baseline pods did not",
    )
}
