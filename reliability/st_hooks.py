"""schemathesis hooks for reliability/api_fuzz.sh (issue 18 item 5), loaded through
SCHEMATHESIS_HOOKS=st_hooks with reliability/ on PYTHONPATH.

* `before_call`: serve's process runtime runs a pod's commands as processes of this machine,
  as root. Every `command` a generated body carries (containers, hooks, probes; in objects,
  merge patches and JSON patch values) becomes `["true"]`: the rest of the body stays fuzzed.
  A watch (`watch=true`) gets `timeoutSeconds=1`, so it ends instead of holding a worker.
* `no_5xx`: the check. Any 5xx answer fails, except the one kube-apiserver gives a request on
  its own: `504` with reason `Timeout`, cause `ResourceVersionTooLarge` (a resourceVersion
  newer than the store's, after the watch cache's 3 s wait).
* `after_call`: tallies the answers by status code into $ST_TALLY (JSON), for the README.
"""

import atexit
import json
import os

import schemathesis

SAFE = ["true"]
TALLY = {}


def _sanitize(v):
    if isinstance(v, dict):
        for k in list(v):
            if k == "command":
                v[k] = list(SAFE)
            elif k == "value" and isinstance(v.get("path"), str) and "command" in v["path"]:
                v[k] = list(SAFE)
            else:
                _sanitize(v[k])
    elif isinstance(v, list):
        for x in v:
            _sanitize(x)


@schemathesis.hook
def before_call(context, case, kwargs):
    if isinstance(case.body, (dict, list)):
        _sanitize(case.body)
    q = case.query
    if isinstance(q, dict) and str(q.get("watch", "")).lower() in ("true", "1"):
        q["timeoutSeconds"] = 1


@schemathesis.hook
def after_call(context, case, response):
    code = str(response.status_code)
    TALLY[code] = TALLY.get(code, 0) + 1


@schemathesis.check
def no_5xx(ctx, response, case):
    """No 5xx, but kube-apiserver's 504 for a too large resourceVersion."""
    if response.status_code < 500:
        return None
    text = response.text or ""
    if response.status_code == 504 and '"ResourceVersionTooLarge"' in text:
        return None
    raise AssertionError(f"{response.status_code}: {text[:500]}")


def _dump():
    path = os.environ.get("ST_TALLY")
    if path:
        old = {}
        if os.path.exists(path):
            old = json.load(open(path))
        for k, v in TALLY.items():
            old[k] = old.get(k, 0) + v
        json.dump(old, open(path, "w"))


atexit.register(_dump)
