{{/*
The chart name, for app.kubernetes.io/name.
*/}}
{{- define "linkforge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name, as namePrefix in config/default: the
release name, with the chart name appended unless it is already in it. The
release "linkforge" gives linkforge-manager, linkforge-redirector, ...
*/}}
{{- define "linkforge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
chart-version, for helm.sh/chart.
*/}}
{{- define "linkforge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object: config/default's part-of label and Helm's own.
*/}}
{{- define "linkforge.commonLabels" -}}
helm.sh/chart: {{ include "linkforge.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/part-of: linkforge
{{- end }}

{{/*
Labels of the namespaced objects and the roles: commonLabels and the name.
*/}}
{{- define "linkforge.labels" -}}
{{ include "linkforge.commonLabels" . }}
app.kubernetes.io/name: {{ include "linkforge.name" . }}
{{- end }}

{{/*
Selector labels of a component's pods; call with
(dict "ctx" $ "component" "manager"). Deployment selectors are immutable, so
these equal config/default's: a release can take over a kustomize install.
*/}}
{{- define "linkforge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "linkforge.name" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Labels of a component's objects; call like selectorLabels.
*/}}
{{- define "linkforge.componentLabels" -}}
{{ include "linkforge.commonLabels" .ctx }}
{{ include "linkforge.selectorLabels" . }}
{{- end }}

{{/*
A component's image, <repository>/<component>, by digest when image.digests
has one (as the packaged chart of `make release` does), else by tag; call with
(dict "ctx" $ "component" "manager").
*/}}
{{- define "linkforge.image" -}}
{{- $image := .ctx.Values.image }}
{{- $repository := printf "%s/%s" (trimSuffix "/" $image.repository) .component }}
{{- with index (default dict $image.digests) .component }}
{{- printf "%s@%s" $repository . }}
{{- else }}
{{- printf "%s:%s" $repository ($image.tag | default .ctx.Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount names.
*/}}
{{- define "linkforge.managerServiceAccount" -}}
{{ include "linkforge.fullname" . }}-manager
{{- end }}
{{- define "linkforge.redirectorServiceAccount" -}}
{{ include "linkforge.fullname" . }}-redirector
{{- end }}

{{/* The Secret of the redirectors' peer key (created by the first replica). */}}
{{- define "linkforge.peerKeySecret" -}}
{{ include "linkforge.fullname" . }}-peer-key
{{- end }}

{{/*
"true" when the redirector's click events have a sink (redirector.events), else empty.
*/}}
{{- define "linkforge.redirectorEventsOn" -}}
{{- with .Values.redirector.events -}}
{{- if or .cloudEvents.url .otlp.endpoint .otlp.logsEndpoint }}true{{ end -}}
{{- end -}}
{{- end }}
