//! Writes the golden fixtures (see `sandbox_webhook_fuzz::fixtures`) as seed
//! inputs for `review_raw`, leaving out those over libFuzzer's `-max_len`
//! (the replay still times them).
//!
//! ```sh
//! cargo run --release --example seeds -- ../tests/fixtures corpus/review_raw
//! ```

use std::path::Path;
use std::process::ExitCode;

use sandbox_webhook_fuzz::{MAX_LEN, fixtures};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, out] = args.as_slice() else {
        eprintln!("usage: seeds FIXTURES_DIR OUT_DIR");
        return ExitCode::from(2);
    };
    match write(Path::new(dir), Path::new(out)) {
        Ok((written, skipped)) => {
            println!("{written} seeds written to {out}, {skipped} over {MAX_LEN} bytes left out");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("seeds: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(dir: &Path, out: &Path) -> Result<(usize, usize), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let (mut written, mut skipped) = (0, 0);
    for (name, body) in fixtures::reviews(dir)? {
        if body.len() > MAX_LEN {
            skipped += 1;
            continue;
        }
        let path = out.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        written += 1;
    }
    Ok((written, skipped))
}
