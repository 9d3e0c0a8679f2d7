//! Stamps the git revision into the binary (`--version`, the
//! `sandbox_webhook_build_info` metric). `SANDBOX_WEBHOOK_REVISION` wins, for
//! builds without a git checkout (the Dockerfile passes it as a build arg);
//! otherwise `git rev-parse`, else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SANDBOX_WEBHOOK_REVISION");
    let revision = std::env::var("SANDBOX_WEBHOOK_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SANDBOX_WEBHOOK_REVISION={revision}");
    // Re-run when HEAD moves: HEAD itself (a branch switch) and the branch's
    // ref (a commit). Both exist in any checkout that has a revision.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
        && std::path::Path::new(&path).exists()
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
