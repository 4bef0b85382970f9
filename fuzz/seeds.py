#!/usr/bin/python3
"""Seed corpora for the fuzz targets, from the real manifests of ../shared/corpus.

    /usr/bin/python3 fuzz/seeds.py CORPUS_DIR OUT_DIR

Writes OUT_DIR/TARGET/NAME for every target of fuzz/Cargo.toml, in the input format each
target documents: the manifests as they are (with the option bytes the target reads first),
the same objects as API requests (create, then list with selectors, patch in the three patch
types, watch, delete with options), patches of those objects, query strings, and protobuf
bodies as kubectl's typed commands send them. Needs PyYAML (Debian's python3-yaml, which
python3-kubernetes pulls in).
"""

import hashlib
import json
import os
import sys

import yaml

# The served resources by kind: (path prefix of the collection, namespaced).
PATHS = {
    "Pod": "/api/v1/namespaces/default/pods",
    "ConfigMap": "/api/v1/namespaces/default/configmaps",
    "Secret": "/api/v1/namespaces/default/secrets",
    "Service": "/api/v1/namespaces/default/services",
    "Namespace": "/api/v1/namespaces",
    "Event": "/api/v1/namespaces/default/events",
    "Deployment": "/apis/apps/v1/namespaces/default/deployments",
    "ReplicaSet": "/apis/apps/v1/namespaces/default/replicasets",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    "Lease": "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    "EndpointSlice": "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
}

# Every other kind of the corpus is still sent, as a Pod, a ConfigMap and a Deployment would
# refuse it (wrong kind, unknown fields).
FALLBACK = "/api/v1/namespaces/default/configmaps"


def write(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def requests(*reqs):
    """api_request's format: METHOD TARGET\\nCONTENT-TYPE\\nBODY, joined by \\n%%\\n."""
    parts = []
    for method, target, ct, body in reqs:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        parts.append(f"{method} {target}\n{ct}\n{body}".encode())
    return b"\n%%\n".join(parts)


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited protobuf field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_int(num, n):
    return varint(num << 3) + varint(n)


def unknown(api_version, kind, raw):
    """kube's protobuf envelope: k8s\\0 + runtime.Unknown{typeMeta, raw}."""
    type_meta = field(1, api_version) + field(2, kind)
    return b"k8s\0" + field(1, type_meta) + field(2, raw)


def protobuf_seeds():
    meta = lambda name, labels=(): field(1, name) + b"".join(
        field(11, field(1, k) + field(2, v)) for k, v in labels
    )
    cm = field(1, meta("cm", [("app", "web")])) + field(2, field(1, "k") + field(2, "v"))
    yield unknown("v1", "ConfigMap", cm)
    secret = field(1, meta("s")) + field(2, field(1, "k") + field(2, b"\x00\x01bytes"))
    yield unknown("v1", "Secret", secret)
    ns = field(1, meta("team"))
    yield unknown("v1", "Namespace", ns)
    container = field(1, "app") + field(2, "nginx:1.27") + field(3, "sleep") + field(3, "100")
    spec = field(2, container) + field_int(4, 0)  # terminationGracePeriodSeconds: 0
    yield unknown("v1", "Pod", field(1, meta("p")) + field(2, spec))
    pod_template = field(1, meta("", [("app", "web")])) + field(2, field(2, container))
    selector = field(1, field(1, "app") + field(2, "web"))
    dspec = field_int(1, 3) + field(2, selector) + field(3, pod_template)
    yield unknown("apps/v1", "Deployment", field(1, meta("d")) + field(2, dspec))
    eviction = field(1, meta("p")) + field(2, field_int(1, 0))
    yield unknown("policy/v1", "Eviction", eviction)
    yield unknown("v1", "DeleteOptions", field_int(1, 5) + field(4, "Foreground"))


QUERIES = [
    "labelSelector=app%3Dweb,tier!=db&fieldSelector=metadata.name%3Dweb",
    "labelSelector=env+in+(prod,staging),!legacy,release&limit=2",
    "labelSelector=environment+notin+(qa)&resourceVersion=0&resourceVersionMatch=NotOlderThan",
    "fieldSelector=spec.nodeName%3Dpodgrace,status.phase!%3DRunning&watch=true&allowWatchBookmarks=true",
    "watch=1&resourceVersion=3&timeoutSeconds=5&sendInitialEvents=true",
    "limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJkZWZhdWx0L2EifQ",
    "resourceVersion=7&resourceVersionMatch=Exact",
    "gracePeriodSeconds=0&propagationPolicy=Background&dryRun=All",
    "orphanDependents=true&fieldValidation=Strict&includeObject=Object",
]


def patch_seeds(obj):
    """(patch type byte, patch) for one object: merge, strategic with directives, JSON patch."""
    labels = {"metadata": {"labels": {"podgrace/fuzz": "1", "app": None}}}
    yield labels
    spec = obj.get("spec") or {}
    tpl = (spec.get("template") or {}).get("spec") or spec
    containers = tpl.get("containers") or []
    if containers:
        name = containers[0].get("name", "app")
        yield {
            "spec": {
                "$setElementOrder/containers": [{"name": c.get("name", "")} for c in containers],
                "containers": [
                    {"name": name, "image": "nginx:1.28", "$patch": "merge",
                     "ports": [{"containerPort": 8080, "$patch": "delete"}]},
                ],
            }
        }
        yield {"spec": {"containers": [{"name": name, "$patch": "delete"}], "$retainKeys": ["containers"]}}
    yield {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["b"]}}
    yield [{"op": "add", "path": "/metadata/labels/x", "value": "y"},
           {"op": "replace", "path": "/metadata/name", "value": "z"},
           {"op": "test", "path": "/kind", "value": obj.get("kind")},
           {"op": "move", "from": "/metadata/labels", "path": "/metadata/annotations"}]


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    objects = []
    for root, _, files in os.walk(corpus):
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml", ".json")):
                continue
            path = os.path.join(root, f)
            raw = open(path, "rb").read()
            # manifest: version byte (19 = 1.37) then the file; also 1.18 and 1.32.
            for v in (19, 0, 14):
                write(out, "manifest", bytes([v]) + raw)
            write(out, "explain", bytes([19, 0, 7]) + raw)
            write(out, "explain", bytes([14, 0b00010011, 90]) + raw)
            write(out, "lint", bytes([19]) + b"\0" + raw)
            write(out, "lint", bytes([14]) + b"disable: [prestop-near-grace]\nendpointLagSeconds: 5\n\0" + raw)
            try:
                docs = [d for d in yaml.safe_load_all(raw) if isinstance(d, dict)]
            except yaml.YAMLError:
                docs = []
            objects.extend(docs)
    for obj in objects:
        kind = obj.get("kind", "")
        coll = PATHS.get(kind, FALLBACK)
        name = (obj.get("metadata") or {}).get("name", "x")
        one = f"{coll}/{name}"
        j = json.dumps(obj)
        write(out, "api_request", requests(("POST", coll, "application/json", j)))
        write(out, "api_request", requests(
            ("POST", coll + "?fieldValidation=Strict", "application/json", j),
            ("GET", coll + "?labelSelector=app%3Dweb,tier!=db&limit=1", "", ""),
            ("PATCH", one, "application/strategic-merge-patch+json",
             {"metadata": {"labels": {"podgrace/fuzz": "1"}}}),
            ("PATCH", one, "application/merge-patch+json", {"metadata": {"annotations": {"a": "b"}}}),
            ("PATCH", one, "application/json-patch+json",
             [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
            ("GET", coll + "?watch=1&resourceVersion=1&allowWatchBookmarks=true", "", ""),
            ("DELETE", one + "?gracePeriodSeconds=3", "application/json",
             {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}),
            ("GET", one, "", ""),
        ))
        for p in patch_seeds(obj):
            for k in (0, 7, 33):
                write(out, "api_patch", bytes([k]) + j.encode() + b"\0" + json.dumps(p).encode())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"terminationGracePeriodSeconds": 5, "containers": [
               {"name": "app", "image": "nginx:1.27", "command": ["sleep", "100"],
                "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}]}}
    pods = PATHS["Pod"]
    write(out, "api_request", requests(
        ("POST", pods, "application/json", pod),
        ("PUT", pods + "/web/status", "application/json",
         dict(pod, status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})),
        ("POST", pods + "/web/eviction", "application/json",
         {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"},
          "deleteOptions": {"gracePeriodSeconds": 1}}),
        ("GET", pods + "/web/log?tailLines=3&sinceSeconds=5&limitBytes=10", "", ""),
        ("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dpodgrace&watch=true", "", ""),
        ("DELETE", pods + "?labelSelector=app%3Dweb", "", ""),
        ("GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", "", ""),
        ("GET", "/openapi/v3/api/v1", "", ""),
    ))
    for q in QUERIES:
        write(out, "api_query", q.encode() + b"\n" + b'{"gracePeriodSeconds": 2, "preconditions": {"uid": "u"}}')
        write(out, "api_request", requests(("GET", f"{pods}?{q}", "", "")))
    for pb in protobuf_seeds():
        write(out, "api_protobuf", pb)
        write(out, "api_request", requests(("POST", FALLBACK, "application/vnd.kubernetes.protobuf", "")) + pb)


if __name__ == "__main__":
    main()
