//! Exact values of Kubernetes quantities, so that the configuration can be
//! checked the way the apiserver checks a container's resources (a request
//! above its limit, a fractional extended resource) before every sandbox pod
//! is refused for it.

use std::cmp::Ordering;

use super::rules;

/// A non-negative number `digits × 10^exp`, exact: no leading or trailing
/// zeros in `digits` (empty for zero). Binary suffixes are multiplied out, so
/// `1Ki` and `1024` are equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    digits: Vec<u8>,
    exp: i64,
}

impl Quantity {
    /// Parses text that matches [`rules::QUANTITY`]; the error is a sentence.
    pub fn parse(text: &str) -> Result<Self, String> {
        rules::quantity_syntax(text)?;
        let body = text.strip_prefix('+').unwrap_or(text);
        let number_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_end);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
        let too_big = || format!("'{}' is out of range", rules::shorten(text));
        let frac_len = i64::try_from(frac.len()).map_err(|_| too_big())?;
        let mut exp = -frac_len;
        let mut binary_powers = 0;
        match suffix {
            "" => {}
            "n" => exp -= 9,
            "u" => exp -= 6,
            "m" => exp -= 3,
            "k" => exp += 3,
            "M" => exp += 6,
            "G" => exp += 9,
            "T" => exp += 12,
            "P" => exp += 15,
            "E" => exp += 18,
            "Ki" => binary_powers = 1,
            "Mi" => binary_powers = 2,
            "Gi" => binary_powers = 3,
            "Ti" => binary_powers = 4,
            "Pi" => binary_powers = 5,
            "Ei" => binary_powers = 6,
            e => {
                // The grammar leaves only a decimal exponent here.
                let n: i64 = e[1..].parse().map_err(|_| too_big())?;
                exp = exp.checked_add(n).ok_or_else(too_big)?;
            }
        }
        for _ in 0..binary_powers {
            multiply(&mut digits, 1024);
        }
        Ok(Quantity::normalized(digits, exp))
    }

    fn normalized(mut digits: Vec<u8>, mut exp: i64) -> Self {
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exp += 1;
        }
        if digits.is_empty() {
            exp = 0;
        }
        Quantity { digits, exp }
    }

    /// Whole numbers only: extended resources cannot be split.
    pub fn is_integer(&self) -> bool {
        self.exp >= 0
    }
}

/// `digits *= factor`, schoolbook, most significant digit first.
fn multiply(digits: &mut Vec<u8>, factor: u32) {
    let mut carry = 0u32;
    for d in digits.iter_mut().rev() {
        let v = u32::from(*d) * factor + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => {
                // Position of the leading digit, then the digits themselves:
                // without trailing zeros a shorter equal prefix is smaller.
                let magnitude = |q: &Quantity| q.digits.len() as i128 + i128::from(q.exp);
                magnitude(self)
                    .cmp(&magnitude(other))
                    .then_with(|| self.digits.cmp(&other.digits))
            }
        }
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn equal_spellings() {
        for (a, b) in [
            ("100m", "0.1"),
            ("1Ki", "1024"),
            ("1Mi", "1048576"),
            ("1Gi", "1073741824"),
            ("1e3", "1k"),
            ("1000m", "1"),
            ("0", "0.000"),
            ("+2", "2."),
            (".5", "500m"),
            ("1Ei", "1152921504606846976"),
            ("10n", "0.00000001"),
        ] {
            assert_eq!(q(a), q(b), "{a} == {b}");
        }
    }

    #[test]
    fn ordering() {
        for (small, big) in [
            ("0", "1n"),
            ("999m", "1"),
            ("1", "1001m"),
            ("1G", "1Gi"),
            ("0.12", "0.125"),
            ("9", "10"),
            ("128Mi", "1Gi"),
            ("1m", "1e-2"),
        ] {
            assert!(q(small) < q(big), "{small} < {big}");
        }
    }

    #[test]
    fn integers() {
        assert!(q("2").is_integer());
        assert!(q("2000m").is_integer());
        assert!(q("1k").is_integer());
        assert!(q("0").is_integer());
        assert!(!q("1500m").is_integer());
        assert!(!q("0.5").is_integer());
    }

    #[test]
    fn errors() {
        assert!(Quantity::parse("lots").is_err());
        assert!(
            Quantity::parse("1e99999999999999999999")
                .unwrap_err()
                .contains("out of range")
        );
    }
}
