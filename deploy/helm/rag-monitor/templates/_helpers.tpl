{{/* Names and labels. Every template here takes this chart's context (its .Values). */}}

{{- define "rag-monitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rag-monitor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "rag-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rag-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rag-monitor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "rag-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: rag-monitor
{{- end }}

{{- define "rag-monitor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The monitor's config: .Values.config, with judge.api_key_env set when a judge Secret is given. */}}
{{- define "rag-monitor.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if .Values.judge.existingSecret }}
{{- $judge := deepCopy (default (dict) $config.judge) }}
{{- $_ := set $judge "api_key_env" .Values.judge.envName }}
{{- $_ := set $config "judge" $judge }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
Fails the rendering when .Values.config turns on a feature whose extra the image does not
carry (.Values.image.extras), naming each such key the way `rag-monitor check-config` would
in that image (docs/contract.md, "Extras"): a judge (any evaluator but the local ones and
f1), second_stage, phone redaction (a default detector), the Kafka receiver.
*/}}
{{- define "rag-monitor.checkExtras" -}}
{{- $config := .Values.config }}
{{- $needs := list }}
{{- range $i, $entry := (default (list) $config.evaluators) }}
{{- if not (or (hasPrefix "local_" $entry.name) (eq $entry.name "f1")) }}
{{- $needs = append $needs (list (printf "evaluators.%d.name: %s, an LLM judge," $i $entry.name) "judges") }}
{{- end }}
{{- if $entry.second_stage }}
{{- $needs = append $needs (list (printf "evaluators.%d.second_stage: the second stage" $i) "second-stage") }}
{{- end }}
{{- end }}
{{- if and (dig "redaction" "enabled" false $config) (has "phone" (dig "redaction" "detectors" (list "phone") $config)) }}
{{- $needs = append $needs (list "redaction.detectors: the phone detector" "redaction") }}
{{- end }}
{{- if dig "receivers" "kafka" "enabled" false $config }}
{{- $needs = append $needs (list "receivers.kafka.enabled: the Kafka receiver" "kafka") }}
{{- end }}
{{- $carried := .Values.image.extras }}
{{- $problems := list }}
{{- range $needs }}
{{- $extra := index . 1 }}
{{- if not (or (has $extra $carried) (has "all" $carried)) }}
{{- $problems = append $problems (printf "config.%s needs the %s extra, which image.extras does not list: build the image with it (docker build --build-arg EXTRAS=%s, deploy/Dockerfile) and add it to image.extras" (index . 0) $extra (join "," (append $carried $extra))) }}
{{- end }}
{{- end }}
{{- with $problems }}
{{- fail (join "\n" (uniq .)) }}
{{- end }}
{{- end }}
