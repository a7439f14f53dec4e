{{/* Names ------------------------------------------------------------------------------- */}}

{{- define "webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Fully qualified name, also used for the cluster-scoped objects (ClusterRole, binding,
MutatingWebhookConfiguration). 52 characters leave room for the "-tls"/"-ca"/"-certs" suffixes.
*/}}
{{- define "webhook.fullname" -}}
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

{{- define "webhook.serviceAccountName" -}}
{{- default (include "webhook.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The helm-mode (and cert-manager) Secret. */}}
{{- define "webhook.tlsSecretName" -}}
{{- printf "%s-tls" (include "webhook.fullname" .) -}}
{{- end -}}

{{/*
The operator-mode Secret, which the operator's leader fills. Also named by the umbrella chart
(with a constructed context of only Values, Release and Chart.Name) for the operator's RBAC.
*/}}
{{- define "webhook.certsSecretName" -}}
{{- printf "%s-certs" (include "webhook.fullname" .) -}}
{{- end -}}

{{/* Labels ------------------------------------------------------------------------------ */}}

{{- define "webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/*
Common labels. managed-by is Helm's own value ("Helm"), never "kubeplus-isolation": that value
marks objects the operator owns, which the tamper guard protects from everyone else.
*/}}
{{- define "webhook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kubeplus-isolation
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Image --------------------------------------------------------------------------------- */}}

{{- define "webhook.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Serving certificate -------------------------------------------------------------------- */}}

{{/* DNS names the in-cluster Service answers to. */}}
{{- define "webhook.serviceDNSNames" -}}
{{- $svc := include "webhook.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) | toJson -}}
{{- end -}}

{{/*
Subject alternative names of the serving certificate, as JSON {"dns": [...], "ips": [...]}:
the Service's names, plus the host of clientConfig.url when that override is set (so a webhook
process outside the cluster can serve the same, chart-managed certificate).
*/}}
{{- define "webhook.certSANs" -}}
{{- $dns := include "webhook.serviceDNSNames" . | fromJsonArray -}}
{{- $ips := list -}}
{{- with .Values.clientConfig.url -}}
{{- $host := (urlParse .).hostname -}}
{{- if regexMatch "^[0-9]{1,3}(\\.[0-9]{1,3}){3}$" $host -}}
{{- $ips = append $ips $host -}}
{{- else if contains ":" $host -}}
{{- $ips = append $ips $host -}}
{{- else if not (has $host $dns) -}}
{{- $dns = append $dns $host -}}
{{- end -}}
{{- end -}}
{{- dict "dns" $dns "ips" $ips | toJson -}}
{{- end -}}

{{/*
The helm-generated TLS material, as JSON {"caCert", "caKey", "cert", "key"} (PEM strings).

Stable across upgrades: the existing Secret is looked up and
  - reused as a whole when it carries the same SANs and neither the CA nor the leaf expires
    within tls.renewBeforeDays;
  - otherwise, when only the leaf is stale (or the SANs changed) but the CA is still valid for
    longer than a new leaf would live, a new leaf is signed by the SAME CA, so the caBundle in
    the MutatingWebhookConfiguration does not change and no request fails during the rollout;
  - otherwise a new CA and leaf are generated.
Validity is tracked in the Secret's annotations (sprig cannot parse X.509).
`helm template` and `--dry-run=client` cannot look up and always generate fresh material.
Memoised in .Values._tls so the Secret and the webhook configuration agree within one render.
*/}}
{{- define "webhook.generatedTLS" -}}
{{- if not .Values._tls -}}
{{- $sans := include "webhook.certSANs" . | fromJson -}}
{{- $sansKey := printf "dns=%s;ips=%s" (join "," $sans.dns) (join "," $sans.ips) -}}
{{- $now := now | unixEpoch | int64 -}}
{{- $renew := mul .Values.tls.renewBeforeDays 86400 | int64 -}}
{{- $leafLife := mul .Values.tls.certValidityDays 86400 | int64 -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "webhook.tlsSecretName" .) -}}
{{- $data := dict -}}
{{- $ann := dict -}}
{{- if $existing -}}
{{- $data = $existing.data | default dict -}}
{{- $ann = $existing.metadata.annotations | default dict -}}
{{- end -}}
{{- $complete := and (index $data "ca.crt") (index $data "ca.key") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $caNotAfter := index $ann "isolation.kubeplus.io/ca-not-after" | default "0" | int64 -}}
{{- $leafNotAfter := index $ann "isolation.kubeplus.io/cert-not-after" | default "0" | int64 -}}
{{- $caUsable := and $complete (gt $caNotAfter (add $now $leafLife $renew | int64)) -}}
{{- $leafUsable := and $complete (gt $leafNotAfter (add $now $renew | int64)) (gt $caNotAfter (add $now $renew | int64)) (eq (index $ann "isolation.kubeplus.io/cert-sans" | default "") $sansKey) -}}
{{- $out := dict "sans" $sansKey -}}
{{- if $leafUsable -}}
{{- $_ := set $out "caCert" (index $data "ca.crt" | b64dec) -}}
{{- $_ := set $out "caKey" (index $data "ca.key" | b64dec) -}}
{{- $_ := set $out "cert" (index $data "tls.crt" | b64dec) -}}
{{- $_ := set $out "key" (index $data "tls.key" | b64dec) -}}
{{- $_ := set $out "caNotAfter" (toString $caNotAfter) -}}
{{- $_ := set $out "certNotAfter" (toString $leafNotAfter) -}}
{{- else -}}
{{- $ca := dict -}}
{{- if $caUsable -}}
{{- $ca = buildCustomCert (index $data "ca.crt") (index $data "ca.key") -}}
{{- $_ := set $out "caNotAfter" (toString $caNotAfter) -}}
{{- else -}}
{{- $ca = genCAWithKey (printf "%s-ca" (include "webhook.fullname" .)) (int .Values.tls.caValidityDays) (genPrivateKey "ecdsa") -}}
{{- $_ := set $out "caNotAfter" (toString (add $now (mul .Values.tls.caValidityDays 86400))) -}}
{{- end -}}
{{- $leaf := genSignedCertWithKey (first $sans.dns) $sans.ips $sans.dns (int .Values.tls.certValidityDays) $ca (genPrivateKey "ecdsa") -}}
{{- $_ := set $out "caCert" $ca.Cert -}}
{{- $_ := set $out "caKey" $ca.Key -}}
{{- $_ := set $out "cert" $leaf.Cert -}}
{{- $_ := set $out "key" $leaf.Key -}}
{{- $_ := set $out "certNotAfter" (toString (add $now $leafLife)) -}}
{{- end -}}
{{- $_ := set .Values "_tls" $out -}}
{{- end -}}
{{- toJson .Values._tls -}}
{{- end -}}

{{/*
Who issues the CA and serving certificate: "certManager" (certManager.enabled, which takes
precedence), else tls.mode: "operator" (default) or "helm". Reads only .Values, so the umbrella
chart calls it with a constructed context.
*/}}
{{- define "webhook.tlsMode" -}}
{{- if .Values.certManager.enabled -}}
certManager
{{- else -}}
{{- .Values.tls.mode | default "operator" -}}
{{- end -}}
{{- end -}}

{{/*
The operator-mode TLS material as JSON {"data": {...}, "caBundle": "..."}; data values and
caBundle are base64, as the API wants them. The single source of both the -certs Secret's data and
the webhook configuration's caBundle, so the two agree within a render:
  - the -certs Secret exists with a non-empty tls.crt (the operator wrote it): its live data,
    every key unchanged, so `helm upgrade` never alters what the operator wrote (nor its caBundle);
  - else the helm-mode Secret (-tls) exists with ca.crt, ca.key, tls.crt and tls.key (an upgrade
    from tls.mode=helm): exactly those four keys. The operator takes over the same CA, so the
    caBundle does not change and no admission fails during the upgrade;
  - else (fresh install, `helm template`, `--dry-run=client`: lookup returns nothing) no data and
    no caBundle: the operator fills both. A render without data lets `kubectl apply` of the same
    render (GitOps) never touch what the operator wrote.
*/}}
{{- define "webhook.operatorTLS" -}}
{{- $out := dict -}}
{{- $certs := lookup "v1" "Secret" .Release.Namespace (include "webhook.certsSecretName" .) -}}
{{- $certsData := dig "data" dict ($certs | default dict) -}}
{{- $helmData := dig "data" dict ((lookup "v1" "Secret" .Release.Namespace (include "webhook.tlsSecretName" .)) | default dict) -}}
{{- if index $certsData "tls.crt" -}}
{{- $_ := set $out "data" $certsData -}}
{{- else if and (index $helmData "ca.crt") (index $helmData "ca.key") (index $helmData "tls.crt") (index $helmData "tls.key") -}}
{{- $_ := set $out "data" (pick $helmData "ca.crt" "ca.key" "tls.crt" "tls.key") -}}
{{- end -}}
{{- with $out.data -}}
{{- with index . "ca.crt" -}}
{{- $_ := set $out "caBundle" . -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Name of the cert-manager Certificate for the serving certificate. */}}
{{- define "webhook.certificateName" -}}
{{- printf "%s-serving" (include "webhook.fullname" .) -}}
{{- end -}}

{{/* Security contexts (restricted Pod Security Standard) ----------------------------------- */}}

{{- define "webhook.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "webhook.containerSecurityContext" -}}
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

{{/*
"true" unless the umbrella's global.nodeIsolation.engine is admissionPolicy: then node isolation
is applied by the API server's MutatingAdmissionPolicy and no webhook object is rendered.
*/}}
{{- define "webhook.active" -}}
{{- ne (dig "nodeIsolation" "engine" "webhook" (.Values.global | default dict)) "admissionPolicy" -}}
{{- end -}}

{{/*
The ports the container listens on: containerPort and metrics.port, or, with hostNetwork.enabled,
the node's hostNetwork.port and hostNetwork.metricsPort. The Service targets them by name (https,
metrics), so it and the webhook configuration follow.
*/}}
{{- define "webhook.listenPort" -}}
{{- .Values.hostNetwork.enabled | ternary .Values.hostNetwork.port .Values.containerPort | int -}}
{{- end -}}

{{- define "webhook.metricsListenPort" -}}
{{- .Values.hostNetwork.enabled | ternary .Values.hostNetwork.metricsPort .Values.metrics.port | int -}}
{{- end -}}
