//! Which known annotation name a key under the prefix was likely meant to
//! be (the did-you-mean; contract: warning.unknown-annotation). A pod may carry
//! tens of thousands of annotation keys, all chosen by its author, so the check
//! runs in a few operations per key for anything that is no typo: a name too
//! long for any known one, or one whose letters are too far from each known
//! name's, is ruled out before any edit distance is counted, and the distance
//! itself stops as soon as it exceeds what is allowed (contract:
//! warning.typo-cost; 60,000 keys under the prefix took 94 times as long as
//! 60,000 keys outside it).

/// The names after `<prefix>/` that the webhook and its controller read
/// (contract: intent.known-names), from the one list `config::Keys` is
/// made of.
pub use crate::config::ANNOTATION_NAMES as KNOWN;

/// The longest known name; a name longer than this plus the most typos
/// allowed is no typo of any.
const LONGEST: usize = longest();

/// One more than the longest name that can be a typo of a known one
/// ([`LONGEST`] + 2 bytes).
const ROW: usize = LONGEST + 3;

/// The symbols of each known name ([`symbols`]), computed at compile time.
const KNOWN_SYMBOLS: [u64; KNOWN.len()] = {
    let mut out = [0; KNOWN.len()];
    let mut i = 0;
    while i < KNOWN.len() {
        out[i] = symbols(KNOWN[i].as_bytes());
        i += 1;
    }
    out
};

const fn longest() -> usize {
    let mut max = 0;
    let mut i = 0;
    while i < KNOWN.len() {
        if KNOWN[i].len() > max {
            max = KNOWN[i].len();
        }
        i += 1;
    }
    max
}

/// The set of symbols in `name`, without case, one bit each (bytes that
/// are not letters, digits or `-` share bits). A symbol of one name that
/// the other lacks takes at least one edit, so the number of such symbols,
/// either way, is a lower bound on the distance; sharing bits only makes
/// that bound smaller, never wrong.
const fn symbols(name: &[u8]) -> u64 {
    let mut set = 0u64;
    let mut i = 0;
    while i < name.len() {
        set |= SYMBOL[name[i] as usize];
        i += 1;
    }
    set
}

/// The bit of each byte in [`symbols`]: one table look-up per byte.
const SYMBOL: [u64; 256] = {
    let mut out = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        #[expect(clippy::cast_possible_truncation, reason = "b < 256")]
        let lower = (b as u8).to_ascii_lowercase();
        let bit = match lower {
            b'a'..=b'z' => lower - b'a',
            b'0'..=b'9' => lower - b'0' + 26,
            b'-' => 36,
            _ => 37 + lower % 27,
        };
        out[b] = 1 << bit;
        b += 1;
    }
    out
};

/// For each name length, the known names (bit `i` for `KNOWN[i]`) within
/// their allowed typos of it: the only ones a name of that length can be a
/// typo of.
const _: () = assert!(KNOWN.len() <= 32, "BY_LENGTH holds one bit per known name");

const BY_LENGTH: [u32; ROW] = {
    let mut out = [0u32; ROW];
    let mut len = 0;
    while len < ROW {
        let mut i = 0;
        while i < KNOWN.len() {
            if len.abs_diff(KNOWN[i].len()) <= allowed_typos(KNOWN[i]) {
                out[len] |= 1 << i;
            }
            i += 1;
        }
        len += 1;
    }
    out
};

/// The known name an annotation key under the prefix was likely meant to
/// be: same letters in another case, or a small typo. `None` for a known
/// key, a key outside the prefix, or one too far from every known name
/// (other tools put their own keys under `opensandbox.io/` too).
pub(crate) fn misspelled(key: &str, prefix: &str) -> Option<&'static str> {
    let name = under_prefix(key, prefix)?;
    if name.len() > LONGEST + 2 {
        return None;
    }
    // A known key as written is no mistake; in another case it is.
    let exact = key.starts_with(prefix);
    let mut candidates = BY_LENGTH[name.len()];
    if candidates == 0 {
        return None;
    }
    // The known names are in lower case; the name is compared without case.
    let written = name;
    let mut lower = [0u8; ROW];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name.as_bytes());
    lower.make_ascii_lowercase();
    let name = &*lower;
    let set = symbols(name);
    let mut best: Option<(usize, &'static str)> = None;
    while candidates != 0 {
        let i = candidates.trailing_zeros() as usize;
        candidates &= candidates - 1;
        let (known, known_set) = (KNOWN[i], KNOWN_SYMBOLS[i]);
        let allowed = allowed_typos(known);
        let missing = (set & !known_set)
            .count_ones()
            .max((known_set & !set).count_ones());
        if missing as usize > allowed {
            continue;
        }
        let Some(d) = distance_within(name, known.as_bytes(), allowed) else {
            continue;
        };
        if d == 0 && exact && written == known {
            return None;
        }
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, known));
        }
    }
    best.map(|(_, known)| known)
}

/// The part after `<prefix>/`, the prefix compared without case (DNS names
/// have none, so `OpenSandbox.io/timeout` is the same mistake).
fn under_prefix<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    let head = key.get(..prefix.len())?;
    let rest = key.get(prefix.len()..)?;
    let name = rest.strip_prefix('/')?;
    head.eq_ignore_ascii_case(prefix).then_some(name)
}

/// Short names would match too much with a typo allowed: `id` matches only
/// in another case.
const fn allowed_typos(known: &str) -> usize {
    match known.len() {
        0..=3 => 0,
        4..=6 => 1,
        _ => 2,
    }
}

/// Edits (insert, delete, substitute, swap two neighbours) between `a` and
/// `b`, both in lower case (the optimal string alignment distance), if they
/// are at most `max`. A common head and tail cost nothing and are dropped;
/// at the first difference each of the four edits is tried with one edit
/// less to spend. With `max` at most 2 that is at most 16 tries, each a
/// comparison of what is left, where a table would count every cell.
fn distance_within(a: &[u8], b: &[u8], max: usize) -> Option<usize> {
    // Each inserted or deleted byte is an edit.
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    if max == 0 {
        return (a == b).then_some(0);
    }
    let (a, b) = trim_common(a, b);
    if a.is_empty() || b.is_empty() {
        return Some(a.len().max(b.len()));
    }
    let mut best: Option<usize> = None;
    let mut try_rest = |a: &[u8], b: &[u8]| {
        // Once one edit was found to be enough, nothing beats it.
        if best == Some(1) {
            return;
        }
        if let Some(d) = distance_within(a, b, max - 1) {
            best = Some(best.map_or(d + 1, |b| b.min(d + 1)));
        }
    };
    try_rest(&a[1..], &b[1..]);
    try_rest(&a[1..], b);
    try_rest(a, &b[1..]);
    if a.len() > 1 && b.len() > 1 && a[0] == b[1] && a[1] == b[0] {
        try_rest(&a[2..], &b[2..]);
    }
    best
}

/// `a` and `b` without the head and tail they share.
fn trim_common<'x, 'y>(a: &'x [u8], b: &'y [u8]) -> (&'x [u8], &'y [u8]) {
    let mut head = 0;
    while head < a.len() && head < b.len() && a[head] == b[head] {
        head += 1;
    }
    let (a, b) = (&a[head..], &b[head..]);
    let mut tail = 0;
    while tail < a.len() && tail < b.len() && a[a.len() - 1 - tail] == b[b.len() - 1 - tail] {
        tail += 1;
    }
    (&a[..a.len() - tail], &b[..b.len() - tail])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The names the webhook and the controller read or write are exactly
    /// the contract's, in `config::Keys` and in the did-you-mean list alike.
    /// contract: intent.known-names
    #[test]
    fn known_names_are_the_configured_keys() {
        let config = Config::default();
        let k = config.keys();
        let keys = [
            &k.id,
            &k.inject,
            &k.platform,
            &k.timeout,
            &k.expires_at,
            &k.network_policy,
            &k.egress_mode,
            &k.credential_proxy,
            &k.entrypoint,
            &k.main_container,
            &k.egress_auth_token,
            &k.manual_cleanup,
            &k.egress_env,
            &k.execd_isolation,
            &k.lifecycle,
            &k.injected,
            &k.rev,
        ];
        let names: Vec<_> = keys
            .iter()
            .map(|k| k.strip_prefix("opensandbox.io/").expect("under the prefix"))
            .collect();
        let contract = [
            "id",
            "inject",
            "platform",
            "timeout",
            "expires-at",
            "network-policy",
            "egress-mode",
            "credential-proxy",
            "entrypoint",
            "main-container",
            "egress-auth-token",
            "manual-cleanup",
            "egress-env",
            "execd-isolation",
            "lifecycle",
            "injected",
            "rev",
        ];
        assert_eq!(names, contract);
        assert_eq!(KNOWN, contract);
    }

    #[test]
    fn suggests_the_known_name_for_case_and_typos() {
        let p = "opensandbox.io";
        for (key, meant) in [
            ("opensandbox.io/Timeout", "timeout"),
            ("opensandbox.io/timeuot", "timeout"),
            ("opensandbox.io/timeouts", "timeout"),
            ("OpenSandbox.io/timeout", "timeout"),
            ("opensandbox.io/expires_at", "expires-at"),
            ("opensandbox.io/expiresAt", "expires-at"),
            ("opensandbox.io/networkpolicy", "network-policy"),
            ("opensandbox.io/Network-Policy", "network-policy"),
            ("opensandbox.io/ID", "id"),
            ("opensandbox.io/injct", "inject"),
            ("opensandbox.io/egress-auth-tokens", "egress-auth-token"),
            ("opensandbox.io/egres-auth-toke", "egress-auth-token"),
        ] {
            assert_eq!(misspelled(key, p), Some(meant), "{key}");
        }
    }

    #[test]
    fn leaves_known_foreign_and_distant_keys_alone() {
        let p = "opensandbox.io";
        for key in [
            "opensandbox.io/timeout",
            "opensandbox.io/id",
            "opensandbox.io/session-id",
            "opensandbox.io/user-oid",
            "opensandbox.io/ip",
            "opensandbox.io/state",
            "opensandbox.io/",
            "opensandbox.io/tuoemit",
            "example.com/timeout",
            "opensandbox.iox/timeout",
            "opensandbox.io.timeout",
            "kubectl.kubernetes.io/last-applied-configuration",
            "é",
        ] {
            assert_eq!(misspelled(key, p), None, "{key}");
        }
        let long = format!("opensandbox.io/{}", "t".repeat(200));
        assert_eq!(misspelled(&long, p), None);
        assert_eq!(
            misspelled("example.com/Timeout", "example.com"),
            Some("timeout")
        );
    }

    #[test]
    fn distance_counts_edits_without_case() {
        let d =
            |a: &str, b: &str| distance_within(a.to_ascii_lowercase().as_bytes(), b.as_bytes(), 10);
        assert_eq!(d("timeout", "timeout"), Some(0));
        assert_eq!(d("TimeOut", "timeout"), Some(0));
        assert_eq!(d("timeuot", "timeout"), Some(1));
        assert_eq!(d("timout", "timeout"), Some(1));
        assert_eq!(d("tmeouts", "timeout"), Some(2));
        assert_eq!(d("", "id"), Some(2));
        assert_eq!(d("platform", "timeout"), Some(7));
        assert_eq!(d("ab", "ba"), Some(1));
        let within = |a: &str, b: &str, max| distance_within(a.as_bytes(), b.as_bytes(), max);
        assert_eq!(within("tmeouts", "timeout", 1), None);
        assert_eq!(within("platform", "timeout", 2), None);
    }

    /// The whole table, every cell: what the banded count must agree with.
    fn full_distance(a: &[u8], b: &[u8]) -> usize {
        let lower = |c: u8| c.to_ascii_lowercase();
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(lower(a[i - 1]) != lower(b[j - 1]));
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1
                    && j > 1
                    && lower(a[i - 1]) == lower(b[j - 2])
                    && lower(a[i - 2]) == lower(b[j - 1])
                {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }

    /// What `misspelled` must say of `p.io/<name>`, from the whole table.
    fn by_table(name: &str) -> Option<&'static str> {
        // A known name is no typo, even within reach of another
        // (`inject`, `injected`).
        if KNOWN.contains(&name) {
            return None;
        }
        KNOWN
            .iter()
            .map(|k| (full_distance(name.as_bytes(), k.as_bytes()), *k))
            .filter(|(d, k)| *d <= allowed_typos(k) && name != *k)
            .min_by_key(|(d, _)| *d)
            .map(|(_, k)| k)
    }

    proptest::proptest! {
        /// Few letters make many shared heads and tails, repeats and swaps:
        /// where dropping what two names share could go wrong, if it could.
        #[test]
        fn the_count_agrees_with_the_whole_table(
            a in "[abc]{0,7}",
            b in "[abc]{0,7}",
            max in 0usize..4,
        ) {
            let full = full_distance(a.as_bytes(), b.as_bytes());
            let want = (full <= max).then_some(full);
            proptest::prop_assert_eq!(distance_within(a.as_bytes(), b.as_bytes(), max), want);
        }

        /// The length table, the symbol filter and the count never change
        /// an answer: what `misspelled` finds is what the whole table finds.
        #[test]
        fn the_shortcuts_agree_with_the_whole_table(
            name in "[a-zA-Z0-9._-]{0,20}",
            max in 0usize..4,
            known in proptest::sample::select(KNOWN.to_vec()),
        ) {
            let full = full_distance(name.as_bytes(), known.as_bytes());
            let want = (full <= max).then_some(full);
            let lower = name.to_ascii_lowercase();
            proptest::prop_assert_eq!(distance_within(lower.as_bytes(), known.as_bytes(), max), want);
            let key = format!("p.io/{name}");
            let by_table = by_table(&name);
            proptest::prop_assert_eq!(misspelled(&key, "p.io"), by_table);
        }

        /// Near misses of the known names: one or two edits of each.
        #[test]
        fn near_misses_agree_with_the_whole_table(
            known in proptest::sample::select(KNOWN.to_vec()),
            edits in proptest::collection::vec((0usize..20, 0u8..4, "[a-z-]"), 1..3),
        ) {
            let mut name: Vec<u8> = known.as_bytes().to_vec();
            for (at, op, c) in edits {
                let at = at % (name.len() + 1);
                match op {
                    0 => name.insert(at, c.as_bytes()[0]),
                    1 if at < name.len() => { name.remove(at); }
                    2 if at < name.len() => name[at] = c.as_bytes()[0],
                    _ if at + 1 < name.len() => name.swap(at, at + 1),
                    _ => {}
                }
            }
            let name = String::from_utf8(name).expect("ASCII");
            let by_table = by_table(&name);
            proptest::prop_assert_eq!(misspelled(&format!("p.io/{name}"), "p.io"), by_table);
        }
    }
}
