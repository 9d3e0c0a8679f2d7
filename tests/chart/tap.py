"""The TAP-style results of tests/chart/check_*.py, which tests/chart/run.sh
counts: `check` records one, `run_checks` turns an exception into a failed
check, and `finish` prints `ok - [LABEL] <what>` or
`not ok - [LABEL] <what>: <why>` per check and exits 1 if any failed (or
none ran). `expect` is `check` for the checks tests/chart/install.sh embeds,
which name each by what its failure means.
"""
import sys

results = []


def check(what, cond, why=""):
    results.append((what, bool(cond), why))


def expect(cond, failure):
    check(failure, cond)


def run_checks(what, fn):
    """Run fn(); an exception (KeyError on a missing field...) is a failure."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - report anything as a failed check
        check(what, False, f"{type(e).__name__}: {e}")


def finish(label):
    failed = 0
    for what, ok, why in results:
        if ok:
            print(f"ok - [{label}] {what}")
        else:
            failed += 1
            print(f"not ok - [{label}] {what}: {str(why)[:400]}")
    if not results:
        print(f"not ok - [{label}] no checks ran")
        failed = 1
    sys.exit(1 if failed else 0)
