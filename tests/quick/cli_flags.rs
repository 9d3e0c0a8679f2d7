//! Every flag is described: in `--help` (a doc comment) and in
//! `docs/cli.md`, which is generated from the same definitions and must be
//! current, so a new flag cannot ship undocumented.

use clap::{CommandFactory, Parser};
use sandbox_webhook::cli::Args;

const CLI_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md");

/// (`sandbox-webhook serve`, `--addr`, has help) for every visible long flag.
fn flags(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, bool)>) {
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_hide_set() || long == "help" || long == "version" {
            continue;
        }
        let described = arg
            .get_help()
            .is_some_and(|h| !h.to_string().trim().is_empty());
        out.push((path.to_owned(), format!("--{long}"), described));
    }
    for sub in cmd.get_subcommands() {
        flags(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

#[test]
fn every_long_flag_has_help() {
    let mut all = Vec::new();
    flags(&Args::command(), "sandbox-webhook", &mut all);
    assert!(
        all.len() > 40,
        "{} flags: the walk missed subcommands",
        all.len()
    );
    let missing: Vec<String> = all
        .iter()
        .filter(|(_, _, described)| !described)
        .map(|(cmd, flag, _)| format!("{cmd} {flag}: no --help text"))
        .collect();
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}

/// `docs/cli.md` is what `sandbox-webhook docs` prints now. To refresh it:
/// `cargo run -- docs > docs/cli.md`, or run this test with
/// `REFRESH_DOCS=1`.
#[test]
fn docs_cli_md_is_current() {
    let want = sandbox_webhook::cli::markdown();
    if std::env::var_os("REFRESH_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(CLI_MD, &want).unwrap();
    }
    let have = std::fs::read_to_string(CLI_MD).unwrap_or_default();
    assert!(
        have == want,
        "docs/cli.md is stale: run `cargo run -- docs > docs/cli.md` (or this test with REFRESH_DOCS=1)"
    );
    for flag in ["--max-connections", "--egress-token", "--lease-grace"] {
        assert!(have.contains(&format!("`{flag}")), "docs/cli.md: no {flag}");
    }
}

#[test]
fn the_log_environment_is_documented() {
    for sub in ["serve", "controller"] {
        let mut cmd = Args::command();
        let help = cmd
            .find_subcommand_mut(sub)
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("RUST_LOG"), "{sub} --help:\n{help}");
        assert!(help.contains("--log-format"), "{sub} --help:\n{help}");
    }
    let docs = std::fs::read_to_string(CLI_MD).unwrap_or_default();
    assert!(docs.contains("RUST_LOG"), "docs/cli.md: no RUST_LOG");
}

#[test]
fn one_namespace_flag_and_the_old_name_still_works() {
    let mut all = Vec::new();
    flags(&Args::command(), "sandbox-webhook", &mut all);
    assert!(
        !all.iter().any(|(_, flag, _)| flag == "--webhook-namespace"),
        "--webhook-namespace is shown: the one name is --namespace"
    );
    for sub in ["inject", "review"] {
        let new = Args::try_parse_from(["sandbox-webhook", sub, "-f", "-", "--namespace", "ns"]);
        let old = Args::try_parse_from([
            "sandbox-webhook",
            sub,
            "-f",
            "-",
            "--webhook-namespace",
            "ns",
        ]);
        assert!(new.is_ok() && old.is_ok(), "{sub}: {new:?} {old:?}");
        assert_eq!(format!("{:?}", new.unwrap()), format!("{:?}", old.unwrap()));
    }
}

/// contract: cli.docs
#[test]
fn completions_and_man_pages_come_from_the_same_flags() {
    let bin = env!("CARGO_BIN_EXE_sandbox-webhook");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, bash) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(
        bash.contains("--egress-token") && bash.contains("--max-connections"),
        "{bash}"
    );
    let (code, man) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(
        man.contains(".TH sandbox-webhook 1") && man.contains("serve"),
        "{man}"
    );
    let (code, serve) = run(&["man", "serve"]);
    assert_eq!(code, Some(0));
    assert!(serve.contains(".TH sandbox-webhook-serve 1"), "{serve}");
    assert!(serve.contains("max\\-buffered\\-bytes"), "{serve}");
    let (code, validate) = run(&["man", "config", "validate"]);
    assert_eq!(code, Some(0));
    assert!(
        validate.contains(".TH sandbox-webhook-config-validate 1"),
        "{validate}"
    );
    assert_eq!(run(&["man", "no-such"]).0, Some(2));
    assert_eq!(run(&["completions", "tcsh"]).0, Some(2));
}
