{{/* NetworkPolicy peers of one dependency (nats, postgres): CIDRs when given, else its selectors. */}}
{{- define "layby.peers" -}}
{{- if .cidrs -}}
{{- range .cidrs }}
- ipBlock: {cidr: {{ . | quote }}}
{{- end }}
{{- else -}}
- podSelector:
    {{- toYaml .podSelector | nindent 4 }}
  {{- if .namespaceSelector }}
  namespaceSelector:
    {{- toYaml .namespaceSelector | nindent 4 }}
  {{- end }}
{{- end -}}
{{- end -}}
