#!/usr/bin/env python3
"""Writes N Deployments of about 2 KB each (one per file) into DIR, for the explain benchmark."""
import os
import sys

TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i}
  namespace: team-{team}
  labels:
    app.kubernetes.io/name: web-{i}
    app.kubernetes.io/part-of: shop
  annotations:
    example.com/owner: team-{team}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app.kubernetes.io/name: web-{i}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web-{i}
        app.kubernetes.io/part-of: shop
    spec:
      terminationGracePeriodSeconds: {tgps}
      initContainers:
        - name: proxy
          image: envoyproxy/envoy:v1.31.{i3}
          restartPolicy: Always
          args: ["-c", "/etc/envoy/envoy.yaml", "--drain-time-s", "{drain}"]
          ports:
            - name: admin
              containerPort: 9901
          lifecycle:
            preStop:
              exec:
                command: ["sh", "-c", "sleep {proxy_sleep}"]
      containers:
        - name: app
          image: registry.example.com/shop/web:1.{i3}.0
          command: ["/app/server"]
          args: ["--listen=:8080", "--drain-timeout={drain}s"]
          ports:
            - name: http
              containerPort: 8080
          env:
            - name: MODE
              value: production
            - name: POD_IP
              valueFrom:
                fieldRef:
                  fieldPath: status.podIP
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
            limits:
              memory: 256Mi
          readinessProbe:
            httpGet:
              path: /ready
              port: http
            periodSeconds: 5
          livenessProbe:
            httpGet:
              path: /healthz
              port: 8080
            initialDelaySeconds: 10
            terminationGracePeriodSeconds: 10
          lifecycle:
            preStop:
              sleep:
                seconds: {app_sleep}
"""


def main() -> None:
    n, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for i in range(n):
        text = TEMPLATE.format(
            i=i,
            i3=i % 1000,
            team=i % 17,
            replicas=2 + i % 5,
            tgps=30 + i % 90,
            drain=5 + i % 20,
            proxy_sleep=1 + i % 7,
            app_sleep=1 + i % 25,
        )
        with open(os.path.join(out, f"deploy-{i:05}.yaml"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
