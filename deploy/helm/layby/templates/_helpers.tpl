{{/* The release's name prefix of every object (63 characters at most, as DNS labels allow). */}}
{{- define "layby.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select this release's pods; NetworkPolicies and Services match on them. */}}
{{- define "layby.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "layby.labels" -}}
{{ include "layby.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "layby.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "layby.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository@digest when a digest is pinned, else repository:tag. */}}
{{- define "layby.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (required "image.tag or image.digest must be set" .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The environment every Layby container shares: settings from the ConfigMap, secrets by
reference. Call with (dict "root" $ "service" NAME); NAME picks the NATS seed. */}}
{{- define "layby.env" -}}
{{- $root := .root -}}
{{- $s := $root.Values.secrets -}}
- name: LAYBY_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $s.name | quote }}, key: {{ $s.databaseUrlKey | quote }}}}
- name: LAYBY_API_TOKENS
  valueFrom: {secretKeyRef: {name: {{ $s.name | quote }}, key: {{ $s.apiTokensKey | quote }}}}
- name: LAYBY_SECRETS_KEY
  valueFrom: {secretKeyRef: {name: {{ $s.name | quote }}, key: {{ $s.secretsKeyKey | quote }}}}
{{- if $s.webhookSecretsKey }}
- name: LAYBY_WEBHOOK_SECRETS
  valueFrom: {secretKeyRef: {name: {{ $s.name | quote }}, key: {{ $s.webhookSecretsKey | quote }}}}
{{- end }}
{{- if .service }}
- name: LAYBY_NATS_SEED
  valueFrom: {secretKeyRef: {name: {{ $s.natsSeeds.name | quote }}, key: {{ index $s.natsSeeds.keys .service | quote }}}}
{{- end }}
{{- end -}}

{{/* The pod-level settings every Layby pod shares (security, scheduling, /tmp). */}}
{{- define "layby.podSpec" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The volumes every Layby pod has: a writable /tmp on a read-only root, plus extraVolumes. */}}
{{- define "layby.volumes" -}}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "layby.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}
