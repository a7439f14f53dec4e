{{- define "kubeplus-isolation.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "kubeplus-isolation" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-kubeplus-isolation" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kubeplus-isolation.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: kubeplus-isolation
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kubeplus-isolation
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The operator's username as the API server sees it (system:serviceaccount:<ns>:<sa>), computed with
the operator subchart's own naming template so the two can never disagree. Empty when the operator
is not installed.
*/}}
{{- define "kubeplus-isolation.operatorUsername" -}}
{{- if .Values.operator.enabled -}}
{{- $ctx := dict "Values" .Values.operator "Release" .Release "Chart" (dict "Name" "operator") -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "operator.serviceAccountName" $ctx) -}}
{{- end -}}
{{- end -}}

{{/*
Users the tamper guard lets through: the operator plus tamperProtection.exemptUsers, as JSON.
Called with the root context, or with (dict "root" $ "users" <extra users>) for a guard that
exempts more platform identities (the instance guard).
*/}}
{{- define "kubeplus-isolation.exemptUsers" -}}
{{- $root := include "kubeplus-isolation.guardRoot" . | eq "extra" | ternary (get . "root") . -}}
{{- $users := list -}}
{{- with include "kubeplus-isolation.operatorUsername" $root -}}
{{- $users = append $users . -}}
{{- end -}}
{{- concat $users $root.Values.tamperProtection.exemptUsers (get . "users" | default list) | uniq | toJson -}}
{{- end -}}

{{/* Admin groups (plus a guard's extra "groups"), as JSON; same calling convention. */}}
{{- define "kubeplus-isolation.exemptGroups" -}}
{{- $root := include "kubeplus-isolation.guardRoot" . | eq "extra" | ternary (get . "root") . -}}
{{- concat $root.Values.tamperProtection.adminGroups (get . "groups" | default list) | uniq | toJson -}}
{{- end -}}

{{/* "extra" when called with (dict "root" $ ...), "root" with the root context itself. */}}
{{- define "kubeplus-isolation.guardRoot" -}}
{{- if hasKey . "root" }}extra{{ else }}root{{ end -}}
{{- end -}}

{{/*
CEL matchCondition shared by the tamper guard's policies: the request is evaluated only when it
comes from neither an exempt user nor a member of an admin group.
*/}}
{{- define "kubeplus-isolation.notExempt" -}}
!(request.userInfo.username in {{ include "kubeplus-isolation.exemptUsers" . }}) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {{ include "kubeplus-isolation.exemptGroups" . }}))
{{- end -}}

{{/*
Issue 39, cloud admins: besides the explicit lists, the guards let through whoever RBAC allows the
dedicated verb `override` on `tamperprotection` in group isolation.kubeplus.io CLUSTER-WIDE (no
namespace in the check, so only a ClusterRoleBinding can grant it: a RoleBinding in a tenant's
namespace, even to cluster-admin, never does). cluster-admin's rules are `*`, so a cloud admin bound
to it (EKS access entries, GKE, AKS Entra ID) is let through without the chart naming a group; the
ClusterRole <fullname>-tamper-override grants exactly this verb (templates/tamper-override-rbac.yaml).
No resource of that name is served: RBAC authorizes any name. The operator's RBAC must never hold the
verb (deploy/test/tamper-protection.test.ts checks it), and its confinement never consults it.
*/}}
{{- define "kubeplus-isolation.rbacOverride" -}}
{{- dict "group" "isolation.kubeplus.io" "resource" "tamperprotection" "verb" "override" | toJson -}}
{{- end -}}

{{/*
The guards' variable `rbacOverride` (a CEL authorization check of the requester), rendered into a
policy's variables when tamperProtection.rbacOverride.enabled. Variables are evaluated lazily and
each validation ORs it last (kubeplus-isolation.orRbacOverride), so only a request the guard would
otherwise refuse costs an authorization check; every other matched request costs none.
*/}}
{{- define "kubeplus-isolation.rbacOverrideVariable" -}}
{{- if .Values.tamperProtection.rbacOverride.enabled -}}
{{- $o := include "kubeplus-isolation.rbacOverride" . | fromJson -}}
- name: rbacOverride
  expression: {{ printf "authorizer.group(%s).resource(%s).check(%s).allowed()" (squote $o.group) (squote $o.resource) (squote $o.verb) | quote }}
{{- end -}}
{{- end -}}

{{/* " || variables.rbacOverride" when the RBAC override is on, else nothing: the end of every guard validation. */}}
{{- define "kubeplus-isolation.orRbacOverride" -}}
{{- if .Values.tamperProtection.rbacOverride.enabled }} || variables.rbacOverride{{ end -}}
{{- end -}}

{{/* Human-readable list of who may change protected state, for denial messages. */}}
{{- define "kubeplus-isolation.whoMay" -}}
{{- $root := include "kubeplus-isolation.guardRoot" . | eq "extra" | ternary (get . "root") . -}}
{{- $who := list -}}
{{- with include "kubeplus-isolation.operatorUsername" $root -}}
{{- $who = append $who (printf "the kubeplus-isolation operator (%s)" .) -}}
{{- end -}}
{{- with concat $root.Values.tamperProtection.exemptUsers (get . "users" | default list) | uniq -}}
{{- $who = append $who (printf "users %s" (join ", " .)) -}}
{{- end -}}
{{- with include "kubeplus-isolation.exemptGroups" . | fromJsonArray -}}
{{- $who = append $who (printf "members of %s" (join ", " .)) -}}
{{- end -}}
{{- if $root.Values.tamperProtection.rbacOverride.enabled -}}
{{- $o := include "kubeplus-isolation.rbacOverride" $root | fromJson -}}
{{- $who = append $who (printf "identities RBAC allows to %s %s.%s cluster-wide (a ClusterRoleBinding to cluster-admin or to %s-tamper-override)" $o.verb $o.resource $o.group (include "kubeplus-isolation.fullname" $root)) -}}
{{- end -}}
{{- join " or " $who -}}
{{- end -}}

{{/*
global.nodeIsolation.engine: webhook (default), admissionPolicy or both. A global, so the
webhook and operator subcharts read the same value.
*/}}
{{- define "kubeplus-isolation.nodeIsolationEngine" -}}
{{- dig "nodeIsolation" "engine" "webhook" (.Values.global | default dict) -}}
{{- end -}}

{{/*
global.nodeIsolation.refuseUnplaced: "true" when refusal mode is on (files/node-isolation-refusal.yaml).
*/}}
{{- define "kubeplus-isolation.refuseUnplaced" -}}
{{- dig "nodeIsolation" "refuseUnplaced" false (.Values.global | default dict) | toString -}}
{{- end -}}

{{/*
"true" when something reads the operator's NodeIsolation parameters (the admission-policy engine,
refusal mode): then the CRD and its guard are installed, and the operator writes them.
*/}}
{{- define "kubeplus-isolation.nodeIsolationParams" -}}
{{- or (ne (include "kubeplus-isolation.nodeIsolationEngine" .) "webhook") (eq (include "kubeplus-isolation.refuseUnplaced" .) "true") | toString -}}
{{- end -}}

{{/*
global.nodeIsolation.exclusivePools: "true" when the policy is installed, which needs the operator
to feed its parameter.
*/}}
{{- define "kubeplus-isolation.exclusivePools" -}}
{{- $x := dig "nodeIsolation" "exclusivePools" dict (.Values.global | default dict) -}}
{{- and (dig "enabled" true $x) .Values.operator.enabled | toString -}}
{{- end -}}

{{/*
The webhook subchart's view of its own values (Values, Release, Chart.Name), for calling its named
templates ("webhook.fullname", "webhook.certsSecretName", "webhook.tlsMode") so that the names
here can never disagree with the ones it renders.
*/}}
{{- define "kubeplus-isolation.webhookContext" -}}
{{- dict "Values" .Values.webhook "Release" .Release "Chart" (dict "Name" "webhook") | toJson -}}
{{- end -}}

{{/*
"true" when the webhook is installed, active (the engine is not admissionPolicy) and in
tls.mode=operator (certManager.enabled false): then the operator must issue its certificate.
*/}}
{{- define "kubeplus-isolation.operatorIssuesWebhookCertificates" -}}
{{- $ctx := include "kubeplus-isolation.webhookContext" . | fromJson -}}
{{- and .Values.webhook.enabled (ne (include "kubeplus-isolation.nodeIsolationEngine" .) "admissionPolicy") (eq (include "webhook.tlsMode" $ctx) "operator") | toString -}}
{{- end -}}

{{/*
"true" when a service installed (and, for the webhook, active) serves secure metrics: then
scrapers need the <fullname>-metrics-reader ClusterRole.
*/}}
{{- define "kubeplus-isolation.secureMetrics" -}}
{{- $webhook := and .Values.webhook.enabled (ne (include "kubeplus-isolation.nodeIsolationEngine" .) "admissionPolicy") .Values.webhook.metrics.secure -}}
{{- $operator := and .Values.operator.enabled .Values.operator.metrics.secure -}}
{{- or $webhook $operator | toString -}}
{{- end -}}
