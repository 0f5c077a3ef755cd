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

{{/*
Fails unless .host is a host name an HTTPRoute and an Ingress both take: a DNS
name in lower case (labels of a-z, 0-9 and -, at most 63 characters each, 253
in all), not an IP address, perhaps a wildcard "*." before it. .at names the
value in the message. Call with (dict "host" $h "at" "expose.ingress.hosts[0]").
*/}}
{{- define "linkforge.checkHost" -}}
{{- $h := .host }}
{{- if not (kindIs "string" $h) }}
{{- fail (printf "%s: %v is not a host name: want a string such as go.example.com" .at $h) }}
{{- end }}
{{- $name := trimPrefix "*." $h }}
{{- if contains "://" $h }}
{{- fail (printf "%s: %q is a URL: want its host alone, such as go.example.com (set baseURL for a URL)" .at $h) }}
{{- else if gt (len (splitList ":" $h)) 2 }}
{{- fail (printf "%s: %q is an IP address: routes and Ingresses match host names only" .at $h) }}
{{- else if contains ":" $h }}
{{- fail (printf "%s: %q: want a host name alone, without a port (routes match the name; the port is the Gateway's listener or the Ingress controller's)" .at $h) }}
{{- else if contains "*" $name }}
{{- fail (printf "%s: %q: a wildcard is \"*.\" before a name, such as *.example.com, and nowhere else" .at $h) }}
{{- else if ne $h (lower $h) }}
{{- fail (printf "%s: %q has capitals: write it %q (routes and Ingresses take host names in lower case)" .at $h (lower $h)) }}
{{- else if regexMatch `^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$` $name }}
{{- fail (printf "%s: %q is an IP address: routes and Ingresses match host names only" .at $h) }}
{{- else if or (gt (len $h) 253) (not (regexMatch `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$` $name)) }}
{{- fail (printf "%s: %q is not a DNS name: want labels of a-z, 0-9 and - (not first or last), at most 63 characters each and 253 in all, joined by dots, without a trailing dot, such as go.example.com" .at $h) }}
{{- end }}
{{- end }}

{{/*
Fails unless .hosts is a list of hosts (linkforge.checkHost), at least one
and at most .max (when set), each named once; .base: they give the base URL. Call with (dict "hosts" $list "at" "expose.httpRoute.hostnames"
"max" 16).
*/}}
{{- define "linkforge.checkHosts" -}}
{{- $at := .at }}
{{- if not .hosts }}
{{- fail (printf "%s is empty: name the hosts to serve, such as [go.example.com]%s" $at (ternary "; the first gives the short URLs' base (https://<first host>) unless baseURL is set" "" (default false .base))) }}
{{- end }}
{{- if not (kindIs "slice" .hosts) }}
{{- fail (printf "%s: %v is not a list: want the hosts to serve, such as [go.example.com]" $at .hosts) }}
{{- end }}
{{- if and .max (gt (len .hosts) (int .max)) }}
{{- fail (printf "%s: %d hosts, at most %d" $at (len .hosts) (int .max)) }}
{{- end }}
{{- range $i, $h := .hosts }}
{{- include "linkforge.checkHost" (dict "host" $h "at" (printf "%s[%d]" $at $i)) }}
{{- end }}
{{- if ne (len .hosts) (len (uniq .hosts)) }}
{{- fail (printf "%s: %v names a host twice" $at .hosts) }}
{{- end }}
{{- end }}

{{/*
The public base URL of the short links, the manager's --redirect-base-url and
the redirector's --public-base-url: baseURL; else, from expose, <scheme>://
the first host of expose.httpRoute (scheme: expose.httpRoute.scheme) or
expose.ingress (https when a tls entry names the host or its wildcard, else
http); else empty. Fails where expose is on and gives no exact host, or gives
two.
*/}}
{{- define "linkforge.baseURL" -}}
{{- if .Values.baseURL }}
{{- .Values.baseURL }}
{{- else }}
{{- $urls := dict }}
{{- with .Values.expose.httpRoute }}
{{- if .enabled }}
{{- include "linkforge.checkHosts" (dict "hosts" .hostnames "at" "expose.httpRoute.hostnames" "max" 16 "base" true) }}
{{- if not (has .scheme (list "https" "http")) }}
{{- fail (printf "expose.httpRoute.scheme: %q: want https (the Gateway's listener terminates TLS for these hosts) or http" (toString .scheme)) }}
{{- end }}
{{- $_ := set $urls "expose.httpRoute.hostnames" (printf "%s://%s" .scheme (first .hostnames)) }}
{{- end }}
{{- end }}
{{- with .Values.expose.ingress }}
{{- if .enabled }}
{{- include "linkforge.checkHosts" (dict "hosts" .hosts "at" "expose.ingress.hosts" "base" true) }}
{{- $host := first .hosts }}
{{- $scheme := "http" }}
{{- $wildcard := printf "*.%s" (regexReplaceAll `^[^.]*\.` $host "") }}
{{- if kindIs "slice" .tls }}
{{- range .tls }}
{{- if and (kindIs "map" .) (kindIs "slice" .hosts) (or (has $host .hosts) (and (contains "." $host) (has $wildcard .hosts))) }}
{{- $scheme = "https" }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $urls "expose.ingress.hosts" (printf "%s://%s" $scheme $host) }}
{{- end }}
{{- end }}
{{- range $at, $url := $urls }}
{{- if hasPrefix "*." (trimPrefix "https://" (trimPrefix "http://" $url)) }}
{{- fail (printf "%s[0] is the wildcard %q: the short URLs need an exact host (their base is <scheme>://<first host>): put an exact host first, or set baseURL" $at (trimPrefix "https://" (trimPrefix "http://" $url))) }}
{{- end }}
{{- end }}
{{- if gt (len (values $urls | uniq)) 1 }}
{{- fail (printf "expose.httpRoute and expose.ingress give two public base URLs, %s and %s: set baseURL to the one the short URLs name" (get $urls "expose.httpRoute.hostnames") (get $urls "expose.ingress.hosts")) }}
{{- end }}
{{- values $urls | first | default "" }}
{{- end }}
{{- end }}

{{/*
Fails unless the gatewayHosts values (when enabled) are what the manager's
--gateway flags take (cmd/manager, controllers.GatewayHostsOptions.Check):
the Gateway's namespace (a DNS label) and name (a DNS subdomain), a
certificateSecret with {host} that makes a Secret name, and ports 1-65535
(listenerPort, and redirector.service.port, which the routes go to).
*/}}
{{- define "linkforge.checkGatewayHosts" -}}
{{- with .Values.gatewayHosts }}
{{- if .enabled }}
{{- $gw := default dict .gateway }}
{{- if not (kindIs "map" $gw) }}
{{- fail (printf "gatewayHosts.gateway: %v: want {namespace: <the Gateway's namespace>, name: <its name>}, such as {namespace: gateway-system, name: web}" $gw) }}
{{- end }}
{{- if not $gw.name }}
{{- fail "gatewayHosts.gateway.name is empty: name the Gateway the manager programs a listener on for each claimed host, such as web" }}
{{- end }}
{{- if not $gw.namespace }}
{{- fail "gatewayHosts.gateway.namespace is empty: name the Gateway's namespace, such as gateway-system (its Role is made there)" }}
{{- end }}
{{- if not (and (kindIs "string" $gw.namespace) (regexMatch `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$` (toString $gw.namespace))) }}
{{- fail (printf "gatewayHosts.gateway.namespace: %v: want a namespace's name, lower-case letters, digits and - (at most 63), such as gateway-system" $gw.namespace) }}
{{- end }}
{{- if not (and (kindIs "string" $gw.name) (regexMatch `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` (toString $gw.name)) (le (len (toString $gw.name)) 253)) }}
{{- fail (printf "gatewayHosts.gateway.name: %v: want the Gateway's name, a DNS name such as web" $gw.name) }}
{{- end }}
{{- $secret := .certificateSecret }}
{{- if not (kindIs "string" $secret) }}
{{- fail (printf "gatewayHosts.certificateSecret: %v: want a Secret name with {host} in it, such as linkforge-{host}" $secret) }}
{{- end }}
{{- if not (contains "{host}" $secret) }}
{{- fail (printf "gatewayHosts.certificateSecret: %q has no {host}: every host needs a Secret of its own, such as linkforge-{host}" $secret) }}
{{- end }}
{{- $example := replace "{host}" "a-example" $secret }}
{{- if not (regexMatch `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` $example) }}
{{- fail (printf "gatewayHosts.certificateSecret: %q makes %q for the host a.example, not a Secret name (lower-case letters, digits, - and ., such as linkforge-{host})" $secret $example) }}
{{- end }}
{{- include "linkforge.checkPort" (dict "port" .listenerPort "at" "gatewayHosts.listenerPort" "what" "the port of the Gateway's HTTPS listeners, such as 443") }}
{{- include "linkforge.checkPort" (dict "port" $.Values.redirector.service.port "at" "redirector.service.port" "what" "the redirect Service's port, which the Gateway hosts' routes go to, such as 80") }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Fails unless .port is a whole number 1-65535. Call with
(dict "port" $p "at" "gatewayHosts.listenerPort" "what" "...").
*/}}
{{- define "linkforge.checkPort" -}}
{{- $p := .port }}
{{- if kindIs "string" $p }}
{{- fail (printf "%s: %q is a string: want a number, %s" .at $p .what) }}
{{- end }}
{{- if not (or (kindIs "float64" $p) (kindIs "int" $p) (kindIs "int64" $p)) }}
{{- fail (printf "%s: %v is not a number: want %s" .at $p .what) }}
{{- end }}
{{- if or (ne (float64 $p) (float64 (int64 $p))) (lt (int64 $p) 1) (gt (int64 $p) 65535) }}
{{- fail (printf "%s: %v is not a port (1-65535): want %s" .at $p .what) }}
{{- end }}
{{- end }}
