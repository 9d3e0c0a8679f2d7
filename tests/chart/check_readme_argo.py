#!/usr/bin/env python3
"""The chart README's Argo CD ignoreDifferences snippet parses and names the
MutatingWebhookConfiguration the chart renders for release sandbox-webhook in
namespace opensandbox-system.

Usage: check_readme_argo.py README.md RENDERED-MWC.yaml
"""
import re
import sys

import yaml

text = open(sys.argv[1]).read()
(mwc,) = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d and d["kind"] == "MutatingWebhookConfiguration"]
section = text[text.index("### Argo CD"):]
block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
(entry,) = yaml.safe_load(block)["ignoreDifferences"]
print(entry, "rendered name:", mwc["metadata"]["name"])
ok = (entry["group"] == "admissionregistration.k8s.io" and entry["kind"] == "MutatingWebhookConfiguration"
      and entry["name"] == mwc["metadata"]["name"]
      and entry["jqPathExpressions"] == [".webhooks[].clientConfig.caBundle"])
sys.exit(0 if ok else 1)
