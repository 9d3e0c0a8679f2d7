"""The AdmissionReview of a Pod CREATE, as the apiserver sends it
(admission.k8s.io/v1, every field it fills for a create).

Shared by the benchmarks' review bodies (bench/make_reviews.py) and the
differential suite (tests/upstream/differential.py), so that both put the
webhook before the same request the apiserver would.
"""

POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
PODS_RESOURCE = {"group": "", "version": "v1", "resource": "pods"}


def pod_create_review(pod, uid, namespace, user_info):
    """The review of the CREATE of `pod` in `namespace` by `user_info`."""
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": POD_KIND,
            "resource": PODS_RESOURCE,
            "requestKind": POD_KIND,
            "requestResource": PODS_RESOURCE,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": user_info,
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
