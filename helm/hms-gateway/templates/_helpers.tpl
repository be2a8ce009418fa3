{{/* Chart name, truncated to the 63 characters Kubernetes allows in a name. */}}
{{- define "hms-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hms-gateway.fullname" -}}
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

{{- define "hms-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hms-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hms-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hms-gateway.labels" -}}
helm.sh/chart: {{ include "hms-gateway.chart" . }}
{{ include "hms-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "hms-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hms-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hms-gateway.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Secret names: an existing Secret wins over one the chart creates from inline values. */}}
{{- define "hms-gateway.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "hms-gateway.fullname" .)) .Values.tls.existingSecret }}
{{- end }}
{{- define "hms-gateway.usersSecretName" -}}
{{- default (printf "%s-users" (include "hms-gateway.fullname" .)) .Values.usersFile.existingSecret }}
{{- end }}
{{- define "hms-gateway.keytabSecretName" -}}
{{- default (printf "%s-keytab" (include "hms-gateway.fullname" .)) .Values.keytab.existingSecret }}
{{- end }}
{{- define "hms-gateway.metastoreKeytabSecretName" -}}
{{- default (printf "%s-metastore-keytab" (include "hms-gateway.fullname" .)) .Values.metastoreKerberos.keytab.existingSecret }}
{{- end }}
{{- define "hms-gateway.krb5ConfigMapName" -}}
{{- default (printf "%s-krb5" (include "hms-gateway.fullname" .)) .Values.metastoreKerberos.krb5Conf.existingConfigMap }}
{{- end }}
{{/* "true" when a service of a topology speaks SASL (Kerberos) to its metastore. */}}
{{- define "hms-gateway.metastoreSasl" -}}
{{- range $_, $topology := .Values.config.topologies }}
{{- range $topology.services }}
{{- if dig "upstream" "sasl" "" . }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- define "hms-gateway.signingKeysSecretName" -}}
{{- default (printf "%s-signing-keys" (include "hms-gateway.fullname" .)) .Values.signingKeys.existingSecret }}
{{- end }}

{{/* ConfigMap keys cannot hold "/", so topology files are flattened and mapped back on mount. */}}
{{- define "hms-gateway.topologyKey" -}}
{{- printf "topology-%s.yaml" . }}
{{- end }}
