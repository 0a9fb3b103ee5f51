{{/* The name every object of the release starts with. */}}
{{- define "lab-spawner.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting the service's pods. */}}
{{- define "lab-spawner.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels selecting the service's own pods (not the in-chart Redis's). */}}
{{- define "lab-spawner.serverSelectorLabels" -}}
{{ include "lab-spawner.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{/* Labels of every object of the release. */}}
{{- define "lab-spawner.labels" -}}
{{ include "lab-spawner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: lab-spawner
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The in-chart Redis's name. */}}
{{- define "lab-spawner.redisName" -}}
{{- printf "%s-redis" (include "lab-spawner.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The service's configuration: the values' `config` plus the keys the chart owns. */}}
{{- define "lab-spawner.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $kubernetes := get $config "kubernetes" | default dict -}}
{{- $_ := set $kubernetes "mode" "in-cluster" -}}
{{- $_ := set $kubernetes "serviceNamespace" .Release.Namespace -}}
{{- $_ := set $config "kubernetes" $kubernetes -}}
{{- $redis := get $config "redis" | default dict -}}
{{- if .Values.redis.enabled -}}
{{- $_ := set $redis "url" (printf "redis://%s:6379/0" (include "lab-spawner.redisName" .)) -}}
{{- end -}}
{{- $_ := set $config "redis" $redis -}}
{{- toYaml $config -}}
{{- end -}}
