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

{{/* The in-chart Redis with Sentinel: its headless Service, and each pod's sentinel. */}}
{{- define "lab-spawner.redisHeadless" -}}
{{- printf "%s-headless" (include "lab-spawner.redisName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lab-spawner.sentinelAddresses" -}}
{{- $name := include "lab-spawner.redisName" . -}}
{{- $headless := include "lab-spawner.redisHeadless" . -}}
{{- $addresses := list -}}
{{- range $index := until (int .Values.redis.sentinel.replicas) -}}
{{- $addresses = append $addresses (printf "%s-%d.%s:26379" $name $index $headless) -}}
{{- end -}}
{{- join "," $addresses -}}
{{- end -}}

{{/* The service's configuration: the values' `config` plus the keys the chart owns. */}}
{{- define "lab-spawner.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $kubernetes := get $config "kubernetes" | default dict -}}
{{- $_ := set $kubernetes "mode" "in-cluster" -}}
{{- $_ := set $kubernetes "serviceNamespace" .Release.Namespace -}}
{{- $_ := set $config "kubernetes" $kubernetes -}}
{{- $redis := get $config "redis" | default dict -}}
{{- $auth := .Values.redis.auth -}}
{{- if and .Values.redis.enabled .Values.redis.sentinel.enabled -}}
{{- $_ := set $redis "sentinel" (dict "addresses" (include "lab-spawner.sentinelAddresses" . | splitList ",") "serviceName" .Values.redis.sentinel.serviceName) -}}
{{- else if .Values.redis.enabled -}}
{{- $_ := set $redis "url" (printf "redis://%s:6379/0" (include "lab-spawner.redisName" .)) -}}
{{- else if .Values.redis.external.sentinel.addresses -}}
{{- $external := .Values.redis.external.sentinel -}}
{{- $sentinel := dict "addresses" $external.addresses "serviceName" $external.serviceName "db" $external.db -}}
{{- with $auth.username }}{{ $_ := set $sentinel "username" . }}{{ end -}}
{{- with $auth.sentinelUsername }}{{ $_ := set $sentinel "sentinelUsername" . }}{{ end -}}
{{- $_ := set $redis "sentinel" $sentinel -}}
{{- end -}}
{{- $_ := set $config "redis" $redis -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Users' file servers: whether they are enabled ("true" or empty), and their namespace. */}}
{{- define "lab-spawner.fileserverEnabled" -}}
{{- if dig "fileserver" "enabled" false .Values.config }}true{{ end -}}
{{- end -}}

{{- define "lab-spawner.fileserverNamespace" -}}
{{- dig "fileserver" "namespace" "fileservers" .Values.config -}}
{{- end -}}
