{{/*
Named templates for the app's chart, which lists rag-monitor as a dependency and passes
this chart's context, `(index .Subcharts "rag-monitor")` (or the alias it chose):

  metadata:
    annotations:
      {{- include "rag-monitor.podAnnotations" (index .Subcharts "rag-monitor") | nindent 8 }}
  spec:
    initContainers:
      {{- include "rag-monitor.sidecar" (index .Subcharts "rag-monitor") | nindent 8 }}
    volumes:
      {{- include "rag-monitor.volumes" (index .Subcharts "rag-monitor") | nindent 8 }}

The sidecar is a native one (Kubernetes >= 1.29): an init container with
`restartPolicy: Always` starts before the app containers (they start once its startup
probe passes, so the app's first spans find the receiver listening) and is stopped after
they exited, so it drains what the app sent last. Point the app's exporter at
http://127.0.0.1:4317 (OTLP/gRPC) or :4318 (OTLP/HTTP).
*/}}

{{/* The monitor's container; used as a native sidecar and in the standalone Deployment. */}}
{{- define "rag-monitor.container" -}}
name: rag-monitor
image: {{ include "rag-monitor.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args: ["run", "--config", "/etc/rag-monitor/config.yaml"]
ports:
  - name: rag-metrics
    containerPort: 9464
    protocol: TCP
{{- $env := list }}
{{- if .Values.judge.existingSecret }}
{{- $env = append $env (dict "name" .Values.judge.envName "valueFrom" (dict "secretKeyRef" (dict "name" .Values.judge.existingSecret "key" .Values.judge.secretKey))) }}
{{- end }}
{{- if .Values.pipeline.processesFromCpuLimit }}
{{- $env = append $env (dict "name" "RAG_MONITOR_PIPELINE__PROCESSES" "valueFrom" (dict "resourceFieldRef" (dict "containerName" "rag-monitor" "resource" "limits.cpu" "divisor" "1"))) }}
{{- end }}
{{- $env = concat $env .Values.extraEnv }}
{{- with $env }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
startupProbe:
  httpGet: {path: /healthz, port: rag-metrics}
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet: {path: /healthz, port: rag-metrics}
  periodSeconds: 15
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: rag-metrics}
  periodSeconds: 5
  timeoutSeconds: 3
resources:
  {{- toYaml .Values.resources | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
volumeMounts:
  - name: rag-monitor-config
    mountPath: /etc/rag-monitor
    readOnly: true
  - name: rag-monitor-tmp
    mountPath: /tmp
{{- end }}

{{/* One entry of the pod's initContainers list: the monitor as a native sidecar. */}}
{{- define "rag-monitor.sidecar" -}}
- {{ include "rag-monitor.container" . | indent 2 | trim }}
  restartPolicy: Always
{{- end }}

{{/* Entries of the pod's volumes list. */}}
{{- define "rag-monitor.volumes" -}}
- name: rag-monitor-config
  configMap:
    name: {{ include "rag-monitor.fullname" . }}
- name: rag-monitor-tmp
  emptyDir: {}
{{- end }}

{{/* Pod annotations: roll the pod when the monitor's config changes; scrape hints for
Prometheus without the Operator (deploy/prometheus/scrape-kubernetes.yml). */}}
{{- define "rag-monitor.podAnnotations" -}}
checksum/rag-monitor-config: {{ include "rag-monitor.config" . | sha256sum }}
prometheus.io/scrape: "true"
prometheus.io/port: "9464"
prometheus.io/path: /metrics
{{- end }}
