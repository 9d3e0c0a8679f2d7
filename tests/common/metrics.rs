//! Reads the Prometheus text exposition (with `prometheus-parse`, which does
//! not handle `,` or `=` inside label values: none of ours has them) and finds
//! one series by name and labels. Counters and gauges in these tests are
//! whole numbers, so values are compared as integers: a fractional or
//! negative value fails the test instead of being rounded.

use std::collections::HashMap;

use prometheus_parse::{Sample, Scrape, Value};

use crate::processes::{Result, check};

pub struct Metrics {
    text: String,
    scrape: Scrape,
}

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        let scrape = Scrape::parse(lines).expect("reading from a string cannot fail");
        Metrics {
            text: text.to_owned(),
            scrape,
        }
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.scrape.samples.iter().filter(move |s| {
            s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
    }

    /// The value of the one series `name` whose labels are exactly `labels`
    /// (order does not matter). Panics, showing the exposition, when there
    /// is no such series.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let wanted: HashMap<&str, &str> = labels.iter().copied().collect();
        let found: Vec<&Sample> = self
            .matching(name, labels)
            .filter(|s| s.labels.len() == wanted.len())
            .collect();
        match found.as_slice() {
            [one] => whole(one, &self.text),
            [] => panic!("no series {name}{labels:?} in:\n{}", self.text),
            _ => panic!("several series {name}{labels:?} in:\n{}", self.text),
        }
    }

    /// The value of `name{labels}`, or 0 when that series is not exposed yet
    /// (a labelled counter appears only once it was incremented).
    pub fn value_or_zero(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.sum(name, labels)
    }

    /// The sum over every series `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.matching(name, labels)
            .map(|s| whole(s, &self.text))
            .sum()
    }
}

/// An error `{what} went {before} -> {after}` unless counter `what` rose
/// by exactly one between two readings.
pub fn check_counted_once(what: &str, before: u64, after: u64) -> Result<()> {
    check(
        after == before + 1,
        format!("{what} went {before} -> {after}"),
    )
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the assert below admits only whole numbers in [0, 2^53), which convert exactly"
)]
fn whole(sample: &Sample, text: &str) -> u64 {
    let (Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) = sample.value else {
        panic!("{} is a histogram or summary in:\n{text}", sample.metric)
    };
    assert!(
        v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(53),
        "{} is {v}, not a whole count, in:\n{text}",
        sample.metric
    );
    v as u64
}
