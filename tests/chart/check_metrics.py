#!/usr/bin/env python3
"""Every metric a rendered PrometheusRule uses is exposed by the binary.

Usage: check_metrics.py RENDERED.yaml METRICS.txt (a scrape of /metrics)

Also checks that the latency histogram has a finite bucket at or above 1 s:
histogram_quantile reports a quantile beyond the largest finite bucket as that
bucket's bound, so a "p99 above 1 s" alert could never fire otherwise.
"""
import re
import sys

import yaml

(rule,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "PrometheusRule"]
exposed = open(sys.argv[2]).read()
names = set()
for g in rule["spec"]["groups"]:
    for r in g["rules"]:
        names.update(re.findall(r"sandbox_webhook_[a-z_]+", r["expr"]))
missing = []
for n in sorted(names):
    family = re.sub(r"_(bucket|total|count|sum)$", "", n)
    if not re.search(rf"^{re.escape(n)}[{{ ]", exposed, re.M) and f"# TYPE {family} " not in exposed:
        missing.append(n)
buckets = [float(b) for b in
           re.findall(r'^sandbox_webhook_admission_duration_seconds_bucket\{.*le="([0-9.e+-]+)"', exposed, re.M)]
print("metrics used:", ", ".join(sorted(names)))
print("largest finite latency bucket:", max(buckets) if buckets else None)
if missing:
    print("not exposed by the binary:", ", ".join(missing))
if not buckets or max(buckets) < 1.0:
    print("the latency histogram has no finite bucket >= 1 s: histogram_quantile can never exceed",
          max(buckets or [0]))
sys.exit(1 if missing or not buckets or max(buckets) < 1.0 else 0)
