//! The controller's memory and its limit, read at each scrape, so that an
//! alert can say the cache is about to outgrow the container before the
//! kernel kills it (`SandboxWebhookControllerMemoryNearLimit` in the chart's
//! `PrometheusRule`). Linux only; elsewhere both read as unknown.

use std::path::PathBuf;

/// The process's resident set, in bytes (`/proc/self/statm`).
#[must_use]
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The memory limit of the process's cgroup (the container's
/// `limits.memory`), in bytes; `None` when there is none.
#[must_use]
pub fn limit_bytes() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let text = limit_file(&cgroups)
        .into_iter()
        .find_map(|f| std::fs::read_to_string(f).ok())?;
    parse_limit(&text)
}

/// Where the limit is, v2 first: the unified hierarchy's `memory.max`, or
/// v1's `memory.limit_in_bytes`, under the process's own cgroup (`/` inside
/// a container's cgroup namespace).
fn limit_file(proc_self_cgroup: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            files.insert(
                0,
                PathBuf::from("/sys/fs/cgroup")
                    .join(path)
                    .join("memory.max"),
            );
        } else if controllers.split(',').any(|c| c == "memory") {
            files.push(
                PathBuf::from("/sys/fs/cgroup/memory")
                    .join(path)
                    .join("memory.limit_in_bytes"),
            );
        }
    }
    files
}

/// `max` (v2) or a page-rounded `i64::MAX` (v1) means no limit.
fn parse_limit(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (limit < 1 << 60).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_limit_of_its_own_cgroup() {
        assert_eq!(
            limit_file("0::/kubepods/burstable/pod1/abc\n"),
            [PathBuf::from(
                "/sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max"
            )]
        );
        assert_eq!(
            limit_file("0::/\n"),
            [PathBuf::from("/sys/fs/cgroup/memory.max")]
        );
        assert_eq!(
            limit_file("12:cpu,cpuacct:/x\n4:memory:/docker/abc\n"),
            [PathBuf::from(
                "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"
            )]
        );
        assert!(limit_file("garbage").is_empty());
        assert_eq!(parse_limit("134217728\n"), Some(134_217_728));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
    }

    #[test]
    fn reads_its_own_memory() {
        let rss = resident_bytes().expect("Linux has /proc/self/statm");
        assert!(rss > 1 << 20, "{rss}");
    }
}
