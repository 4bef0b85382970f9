#!/usr/bin/env python3
"""A plain-HTTP front for a Kubernetes API server that refuses some requests as RBAC would.

Usage: forbidding_proxy.py UPSTREAM_URL CA_FILE RULE...   (the token in $UPSTREAM_TOKEN)

Every request is passed on to UPSTREAM_URL (https, verified with CA_FILE) with its method,
path, query, headers and body, authenticated with $UPSTREAM_TOKEN when it carries no
credentials of its own (as `kubectl proxy` does: kubectl sends no token over plain HTTP), and
the answer comes back as it is; except the requests a RULE
matches, which get kube-apiserver's 403 Status. A RULE is `VERB|PATH_REGEX|USER|RESOURCE|GROUP|
NAME_GROUP`: VERB the Kubernetes verb the request is (`get`, `list`), RESOURCE as RBAC names it
(`nodes/proxy`, `deployments`), NAME_GROUP the regex group holding the object's name (0: none),
and the message is worded as the apiserver's `responsewriters.forbiddenMessage` and
`errors.NewForbidden` word it. The listening port is printed on the first line of stdout.
Listens on 127.0.0.1 only.
"""

import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = sys.argv[1].rstrip("/")
TOKEN = os.environ.get("UPSTREAM_TOKEN", "")
CONTEXT = ssl.create_default_context(cafile=sys.argv[2])
RULES = []
for rule in sys.argv[3:]:
    verb, regex, user, resource, group, name_group = rule.split("|")
    RULES.append((verb, re.compile(regex), user, resource, group, int(name_group)))


def forbidden(verb, user, resource, group, name, namespace):
    scope = (
        f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    )
    why = f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {scope}'
    plural = resource.split("/")[0]
    gr = f"{plural}.{group}" if group else plural
    message = f'{gr} "{name}" is forbidden: {why}' if name else f"{gr} is forbidden: {why}"
    details = {"kind": plural}
    if name:
        details = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one(self):
        path = self.path.split("?")[0]
        kube_verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                     "DELETE": "delete"}.get(self.command, self.command.lower())
        for verb, regex, user, resource, group, name_group in RULES:
            m = regex.fullmatch(path)
            is_list = kube_verb == "get" and verb == "list"
            if m and (verb == kube_verb or is_list):
                ns = re.search(r"/namespaces/([^/]+)/", path)
                name = m.group(name_group) if name_group else ""
                body = json.dumps(
                    forbidden(verb, user, resource, group, name, ns.group(1) if ns else "")
                ).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        req = urllib.request.Request(UPSTREAM + self.path, data=data, method=self.command)
        for k in ("Authorization", "Accept", "Content-Type", "User-Agent"):
            if self.headers.get(k):
                req.add_header(k, self.headers[k])
        if not self.headers.get("Authorization") and TOKEN:
            req.add_header("Authorization", "Bearer " + TOKEN)
        try:
            resp = urllib.request.urlopen(req, context=CONTEXT, timeout=30)
            status, headers, body = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            status, headers, body = e.code, e.headers, e.read()
        self.send_response(status)
        self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
