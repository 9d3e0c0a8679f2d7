//! Every flag is described: in `--help` (a doc comment) and in
//! `docs/cli.md`, which is generated from the same definitions and must be
//! current, so a new flag cannot ship undocumented.

use clap::{CommandFactory, Parser};
use sandbox_webhook::cli::{Args, limits_markdown, markdown};

use crate::cli_support::assert_holds;

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

/// Every visible long flag of every command, as [`flags`] walks them; more
/// than 40, or the walk missed subcommands.
fn every_flag() -> Vec<(String, String, bool)> {
    let mut all = Vec::new();
    flags(&Args::command(), "sandbox-webhook", &mut all);
    assert!(
        all.len() > 40,
        "{} flags: the walk missed subcommands",
        all.len()
    );
    all
}

#[test]
fn every_long_flag_has_help() {
    let all = every_flag();
    let missing: Vec<String> = all
        .iter()
        .filter(|(_, _, described)| !described)
        .map(|(cmd, flag, _)| format!("{cmd} {flag}: no --help text"))
        .collect();
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}

/// Fails unless the repository's `doc` holds `want`, the text
/// `sandbox-webhook {command}` prints now (saying how to refresh it); with
/// `REFRESH_DOCS=1`, writes it first. Returns the file's text.
#[track_caller]
fn generated_doc_is_current(doc: &str, command: &str, want: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc);
    if std::env::var_os("REFRESH_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(&path, want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{doc} is stale: run `cargo run -- {command} > {doc}` (or this test with REFRESH_DOCS=1)"
    );
    have
}

/// `docs/cli.md` is what `sandbox-webhook docs` prints now. To refresh it:
/// `cargo run -- docs > docs/cli.md`, or run this test with
/// `REFRESH_DOCS=1`.
#[test]
fn docs_cli_md_is_current() {
    let have = generated_doc_is_current("docs/cli.md", "docs", &markdown());
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
    let all = every_flag();
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
    assert_holds(&bash, &["--egress-token", "--max-connections"]);
    let (code, man) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert_holds(&man, &[".TH sandbox-webhook 1", "serve"]);
    let (code, serve) = run(&["man", "serve"]);
    assert_eq!(code, Some(0));
    assert_holds(
        &serve,
        &[".TH sandbox-webhook-serve 1", "max\\-buffered\\-bytes"],
    );
    let (code, validate) = run(&["man", "config", "validate"]);
    assert_eq!(code, Some(0));
    assert_holds(&validate, &[".TH sandbox-webhook-config-validate 1"]);
    assert_eq!(run(&["man", "no-such"]).0, Some(2));
    assert_eq!(run(&["completions", "tcsh"]).0, Some(2));
}

/// `serve`'s command line: the serving pair (required), the configuration,
/// the client CA, both addresses, the namespace, the limit and shutdown
/// flags, the worker threads and the log format, each taken as given.
/// contract: cli.serve
#[test]
fn serve_takes_the_documented_flags() {
    use sandbox_webhook::cli::Command;
    use std::time::Duration;

    let line = "sandbox-webhook serve --tls-cert c.crt --tls-key c.key --config w.yaml \
        --client-ca ca.crt --addr 127.0.0.1:8443 --admin-addr 127.0.0.1:8081 --namespace sw \
        --max-connections 10 --admin-max-connections 3 --request-timeout 2s --head-timeout 3s \
        --idle-timeout 4s --write-timeout 6s --max-buffered-bytes 16777216 --shutdown-delay 0s \
        --shutdown-timeout 7s --worker-threads 2 --log-format json";
    let args = Args::try_parse_from(line.split_whitespace()).unwrap();
    let Command::Serve(a) = args.command else {
        panic!("not serve: {args:?}");
    };
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    assert_eq!(path(&a.tls_cert).as_deref(), Some("c.crt"));
    assert_eq!(path(&a.tls_key).as_deref(), Some("c.key"));
    assert_eq!(path(&a.config).as_deref(), Some("w.yaml"));
    assert_eq!(path(&a.client_ca).as_deref(), Some("ca.crt"));
    assert_eq!(a.addr, Some("127.0.0.1:8443".parse().unwrap()));
    assert_eq!(a.admin_addr, Some("127.0.0.1:8081".parse().unwrap()));
    assert_eq!(a.namespace.as_deref(), Some("sw"));
    let t = &a.tuning;
    assert_eq!((t.max_connections, t.admin_max_connections), (10, 3));
    assert_eq!(t.request_timeout, Duration::from_secs(2));
    assert_eq!(t.head_timeout, Duration::from_secs(3));
    assert_eq!(t.idle_timeout, Duration::from_secs(4));
    assert_eq!(t.write_timeout, Duration::from_secs(6));
    assert_eq!(t.max_buffered_bytes, 16 << 20);
    assert_eq!(t.shutdown_delay, Duration::ZERO);
    assert_eq!(t.shutdown_timeout, Duration::from_secs(7));
    assert_eq!(a.worker_threads, Some(2));
    assert_eq!(format!("{:?}", a.log_format), "Json");

    // The serving pair is required (unless --dev).
    for without in ["--tls-cert c.crt", "--tls-key c.key"] {
        let short = line.replace(without, "");
        let e = Args::try_parse_from(short.split_whitespace()).unwrap_err();
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{without}"
        );
    }
}

/// `docs/limits.md` is what `sandbox-webhook docs --limits` prints now,
/// from the flags of `serve`. To refresh it: `cargo run -- docs --limits >
/// docs/limits.md`, or run this test with `REFRESH_DOCS=1`.
#[test]
fn docs_limits_md_is_current() {
    let have = generated_doc_is_current("docs/limits.md", "docs --limits", &limits_markdown());
    for flag in [
        "--max-connections",
        "--idle-timeout",
        "--max-buffered-bytes",
    ] {
        assert!(
            have.contains(&format!("`{flag} ")),
            "docs/limits.md: no {flag}"
        );
    }
}

/// `5 s`, `1,024`, `64 MiB` and `67108864` as one spelling: digits and a
/// unit, bytes in bytes.
fn normal(value: &str) -> String {
    let value: String = value.chars().filter(|c| !matches!(c, ',' | ' ')).collect();
    for (unit, scale) in [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)] {
        if let Some(n) = value.strip_suffix(unit).and_then(|n| n.parse::<u64>().ok()) {
            return (n * scale).to_string();
        }
    }
    value
}

/// Wherever a doc says what a limit flag's default is (``--flag` ...
/// (default X)`, or a table row ``--flag` | X |`), X is the flag's default,
/// so a default changed in the code cannot leave a doc behind.
#[test]
fn every_default_the_docs_state_is_the_flags() {
    use clap::CommandFactory;
    let defaults: Vec<(String, String)> = sandbox_webhook::server::Tuning::command()
        .get_arguments()
        .filter_map(|a| {
            let default = a
                .get_default_values()
                .first()?
                .to_string_lossy()
                .into_owned();
            Some((a.get_long()?.to_owned(), default))
        })
        .collect();
    assert!(defaults.len() >= 8, "{defaults:?}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("charts/sandbox-webhook/README.md"),
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let generated = ["cli.md", "limits.md"].iter().any(|g| path.ends_with(g));
        if path.extension().is_some_and(|e| e == "md") && !generated {
            docs.push(path);
        }
    }
    let value = r"(\d[\d,.]*(?: ?(?:ms|s|m|h|KiB|MiB|GiB)\b)?)";
    let mut wrong = Vec::new();
    for path in &docs {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(root).unwrap().display();
        for (flag, default) in &defaults {
            let escaped = regex::escape(flag);
            let stated = [
                format!(r"`--{escaped}\b[^`]*`[^`(\n]{{0,80}}\(default {value}"),
                format!(r"(?m)^\| `--{escaped}\b[^`]*` \| {value}"),
            ];
            for pattern in stated {
                for found in regex::Regex::new(&pattern).unwrap().captures_iter(&text) {
                    if normal(&found[1]) != normal(default) {
                        let line = text[..found.get(0).unwrap().start()].lines().count();
                        wrong.push(format!(
                            "{name}:{line}: says --{flag} defaults to {}, but it is {default} (docs/limits.md): link to docs/limits.md instead of restating it",
                            &found[1]
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
