{{/* Names ------------------------------------------------------------------------------- */}}

{{- define "operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified name, also used for the cluster-scoped ClusterRole and its binding. */}}
{{- define "operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Also used by the umbrella chart (with a constructed context of only Values, Release and
Chart.Name) to exempt this ServiceAccount from the tamper guard: keep it free of anything else.
*/}}
{{- define "operator.serviceAccountName" -}}
{{- default (include "operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "operator.leaseName" -}}
{{- default (include "operator.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* Labels ------------------------------------------------------------------------------ */}}

{{- define "operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/*
Common labels. managed-by is Helm's own value ("Helm"), never "kubeplus-isolation": that value
marks objects the operator owns, which the tamper guard protects from everyone else.
*/}}
{{- define "operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kubeplus-isolation
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
Labels of the uninstall hook's objects: component uninstall, and on purpose NOT the operator's
selector labels, so the hook's Pod is never taken for an operator Pod (the Deployment's
selector, its PDB, its Service, the hook's own wait for the operator's Pods to be gone).
*/}}
{{- define "operator.uninstallLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "operator.name" . }}-uninstall
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: uninstall
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kubeplus-isolation
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Image --------------------------------------------------------------------------------- */}}

{{- define "operator.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Security contexts (restricted Pod Security Standard) ----------------------------------- */}}

{{- define "operator.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "operator.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* RBAC rules on instance resources, one rule per API group of instanceGroups ([] when none). */}}
{{- define "operator.instanceRules" -}}
{{- $rules := list -}}
{{- if (.Values.kubeplus | default dict).enabled -}}
{{- /* KubePlus registers its Kinds at run time, all in this one group: "*" only here, read-only. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "platformapi.kubeplus") "resources" (list "*") "verbs" (list "get" "list" "watch")) -}}
{{- end -}}
{{- range .Values.instanceGroups -}}
{{- $rules = append $rules (dict "apiGroups" (list .group) "resources" (.resources | uniq) "verbs" (list "get" "list" "watch" "patch")) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/*
The operator's --node-isolation-engine from the umbrella's global.nodeIsolation.engine:
webhook, admission-policy (admissionPolicy) or both.
*/}}
{{- define "operator.nodeIsolationEngine" -}}
{{- $engine := dig "nodeIsolation" "engine" "webhook" (.Values.global | default dict) -}}
{{- ternary "admission-policy" $engine (eq $engine "admissionPolicy") -}}
{{- end -}}

{{/*
The operator's --node-isolation-refusal from the umbrella's global.nodeIsolation.refuseUnplaced.
*/}}
{{- define "operator.nodeIsolationRefusal" -}}
{{- dig "nodeIsolation" "refuseUnplaced" false (.Values.global | default dict) | toString -}}
{{- end -}}

{{/*
A Go duration string (values.schema.json's goDuration: e.g. 2160h, 1h30m, 2m, 1.5s, 500ms) in
whole milliseconds, for comparing durations at render time.
*/}}
{{- define "operator.durationMs" -}}
{{- $ms := 0.0 -}}
{{- $units := dict "h" 3600000.0 "m" 60000.0 "s" 1000.0 "ms" 1.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ms|h|m|s)" . -1 -}}
{{- $unit := regexFind "(ms|h|m|s)$" . -}}
{{- $ms = addf $ms (mulf (trimSuffix $unit . | float64) (index $units $unit)) -}}
{{- end -}}
{{- $ms | int64 -}}
{{- end -}}

{{/*
global.nodeIsolation.exclusivePools.enabled (default true): the operator writes the ExclusivePools
parameter the umbrella chart's policy reads.
*/}}
{{- define "operator.exclusivePools" -}}
{{- dig "nodeIsolation" "exclusivePools" "enabled" true (.Values.global | default dict) | toString -}}
{{- end -}}
