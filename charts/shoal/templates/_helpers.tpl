{{- define "shoal.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shoal.labels" -}}
app.kubernetes.io/name: shoal
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: shoal
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: shoal
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The operator's SHOAL_NETWORK_POLICY: what it renders into every Broker's NetworkPolicies. */}}
{{- define "shoal.networkPolicy" -}}
{{- $metrics := list (dict "namespaceSelector" (.Values.networkPolicy.metricsNamespaceSelector | default dict)) -}}
{{- dict "enabled" .Values.networkPolicy.enabled "clients" (.Values.networkPolicy.clientsFrom | default list) "metrics" $metrics | toJson -}}
{{- end -}}
