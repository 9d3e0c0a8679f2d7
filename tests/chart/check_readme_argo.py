#!/usr/bin/env python3
"""The chart README's Argo CD ignoreDifferences snippet parses and names the
MutatingWebhookConfiguration and the ValidatingWebhookConfiguration the chart
renders for release sandbox-webhook in namespace opensandbox-system.

Usage: check_readme_argo.py README.md RENDERED-MWC.yaml
"""
import re
import sys

import yaml

text = open(sys.argv[1]).read()
rendered = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
(mwc,) = [d for d in rendered if d["kind"] == "MutatingWebhookConfiguration"]
(vwc,) = [d for d in rendered if d["kind"] == "ValidatingWebhookConfiguration"]
section = text[text.index("### Argo CD"):]
block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
(entry, ventry) = yaml.safe_load(block)["ignoreDifferences"]
print(entry, ventry, "rendered names:", mwc["metadata"]["name"], vwc["metadata"]["name"])
ok = all(e["group"] == "admissionregistration.k8s.io" and e["kind"] == o["kind"]
         and e["name"] == o["metadata"]["name"]
         and e["jqPathExpressions"] == [".webhooks[].clientConfig.caBundle"]
         for e, o in ((entry, mwc), (ventry, vwc)))
sys.exit(0 if ok else 1)
