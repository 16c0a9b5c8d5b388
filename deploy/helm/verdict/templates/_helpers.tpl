{{/* The prefix of every object's name. */}}
{{- define "verdict.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains "verdict" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-verdict" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of one service's objects: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.name" -}}
{{- printf "%s-%s" (include "verdict.fullname" .root) .svc -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "verdict.labels" -}}
app.kubernetes.io/name: verdict
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* A service's selector: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.selectorLabels" -}}
app.kubernetes.io/name: verdict
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .svc }}
{{- end -}}

{{/* A service's labels: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.componentLabels" -}}
{{ include "verdict.labels" .root }}
app.kubernetes.io/component: {{ .svc }}
{{- end -}}

{{/* A service's image, docs/images.md: <registry>/verdict-<svc>:<tag>[@digest]. */}}
{{- define "verdict.image" -}}
{{- $v := index .root.Values .svc -}}
{{- $registry := $v.image.registry | default .root.Values.image.registry -}}
{{- $tag := $v.image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- if $v.image.digest -}}
{{- printf "%s/verdict-%s:%s@%s" $registry .svc $tag $v.image.digest -}}
{{- else -}}
{{- printf "%s/verdict-%s:%s" $registry .svc $tag -}}
{{- end -}}
{{- end -}}

{{/* The logging flags: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.logArgs" -}}
{{- $log := merge (dict) (index .root.Values .svc).log .root.Values.log -}}
- --log-level={{ $log.level }}
- --log-format={{ $log.format }}
{{- end -}}

{{/* PolicyExceptions (policyExceptions), for the services that read them
(webhook, reporter, generator): $. Empty with the defaults. */}}
{{- define "verdict.exceptionArgs" -}}
{{- $e := .Values.policyExceptions | default (dict) -}}
{{- if eq (toString $e.enabled) "false" -}}
- --policy-exceptions=false
{{ end -}}
{{- with $e.namespaces -}}
- --exception-namespaces={{ join "," . }}
{{ end -}}
{{- end -}}

{{/* Where the policies are read (kyverno.mode), for every service: $. */}}
{{- define "verdict.policyAPIArgs" -}}
{{- if .Values.kyverno.mode -}}
- --policy-api=kyverno
{{ end -}}
{{- end -}}

{{/* The API groups of the policy kinds in RBAC rules (kyverno.mode): $. */}}
{{- define "verdict.policyGroups" -}}
{{- if .Values.kyverno.mode -}}
[kyverno.io, policies.kyverno.io]
{{- else -}}
[verdict.dev]
{{- end -}}
{{- end -}}

{{/* Whether a service runs: in shadow mode the generator and the cleaner,
whose work has effects in the cluster, do not ($ and the service). */}}
{{- define "verdict.runs" -}}
{{- if not (and (eq .root.Values.kyverno.mode "shadow") (has .svc (list "generator" "cleaner"))) -}}
true
{{- end -}}
{{- end -}}

{{/* Policies' HTTP calls (policyHTTP), the same for every service: $. */}}
{{- define "verdict.policyHTTPArgs" -}}
{{- $h := .Values.policyHTTP -}}
{{- if $h.enabled -}}
- --policy-http
- --policy-http-timeout={{ $h.timeout }}
{{- if $h.namespacedPolicies }}
- --policy-http-namespaced
{{- end }}
{{- with $h.blocklist }}
- --policy-http-blocklist={{ join "," . }}
{{- end }}
{{- with $h.allowlist }}
- --policy-http-allowlist={{ join "," . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Image registries (imageRegistries), for the services that verify
images (the webhook, the reporter): $. */}}
{{- define "verdict.registryArgs" -}}
{{- $r := .Values.imageRegistries | default (dict) -}}
{{- with $r.blocklist }}
- --registry-blocklist={{ join "," . }}
{{- end }}
{{- if not (kindIs "invalid" $r.maxConcurrent) }}
- --image-verify-max-concurrent={{ $r.maxConcurrent }}
{{- end }}
{{- with $r.credentialSecrets }}
- --registry-credential-secrets={{ join "," . }}
{{- end }}
{{- with $r.maxResponseBytes }}
- --image-verify-max-response-bytes={{ . }}
{{- end }}
{{- if $r.caConfigMapName }}
- --registry-ca-file=/etc/verdict/registry-ca/{{ $r.caKey }}
{{- end }}
{{- with $r.sigstoreTrustedRoot }}{{ if .configMapName }}
- --sigstore-trusted-root=/etc/verdict/sigstore/{{ .key }}
{{- end }}{{ end }}
{{- with $r.cache }}
- --image-verify-cache-ttl={{ .ttl }}
- --image-verify-cache-entries={{ int64 .entries }}
- --image-verify-shared-cache-bytes={{ .sharedBytes }}
{{- end }}
{{- if $r.namespaceCredentials }}
- --registry-namespace-credentials=true
{{- end }}
{{- end -}}

{{/* What a service that verifies images may read of registry
credentials (imageRegistries): the listed Secrets of the release
namespace, and with namespaceCredentials Secrets everywhere:
(dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.registryCredentialsRBAC" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
{{- $name := printf "%s-registry-credentials" (include "verdict.name" $ctx) -}}
{{- $sa := include "verdict.name" $ctx -}}
{{- $r := .root.Values.imageRegistries | default (dict) -}}
{{- with $r.credentialSecrets }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $.root.Release.Namespace }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
rules:
  # imageRegistries.credentialSecrets: the registry credentials cluster
  # policies may name.
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: {{ toJson . }}
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $.root.Release.Namespace }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $.root.Release.Namespace }}
{{- end }}
{{- if $r.namespaceCredentials }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
rules:
  # imageRegistries.namespaceCredentials: tenants' image pull Secrets.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}
{{- end -}}

{{/* The limits of one evaluation (evaluationLimits), the same for every
service that evaluates policies: $. */}}
{{- define "verdict.evaluationLimitArgs" -}}
{{- $l := .Values.evaluationLimits -}}
- --max-foreach-elements={{ int64 $l.maxForEachElements }}
- --max-foreach-depth={{ int64 $l.maxForEachDepth }}
- --work-budget={{ int64 $l.workBudget }}
- --max-expression-steps={{ int64 $l.maxExpressionSteps }}
- --memory-budget={{ kindIs "string" $l.memoryBudget | ternary $l.memoryBudget (int64 $l.memoryBudget) }}
{{- end -}}

{{/* Where the NATS Secrets are mounted. */}}
{{- define "verdict.natsDir" -}}/etc/verdict/nats{{- end -}}

{{/* The Secret of a service's NATS credentials file, its own or the shared
one (empty: none): (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.natsCredentials" -}}
{{- $c := .root.Values.nats.credentials -}}
{{- index ($c.services | default dict) .svc | default $c.secretName -}}
{{- end -}}

{{/* The Secret of a service's NATS NKey seed, its own or the shared one
(empty: none): (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.natsNKey" -}}
{{- $k := .root.Values.nats.nkey -}}
{{- index ($k.services | default dict) .svc | default $k.secretName -}}
{{- end -}}

{{/* The NATS and stream flags every service takes (internal/platform):
(dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.natsArgs" -}}
{{- $n := .root.Values.nats -}}
{{- $creds := include "verdict.natsCredentials" . -}}
{{- $nkey := include "verdict.natsNKey" . -}}
{{- if and $creds $nkey -}}
{{- fail (printf "NATS authentication of %s: a credentials file or an NKey, not both" .svc) -}}
{{- end -}}
{{- if not (or $creds $nkey $n.tls.clientCertSecretName $n.allowUnauthenticated) -}}
{{- fail (printf "NATS needs authentication (%s): set nats.credentials.secretName or nats.nkey.secretName (or their services.%s), or nats.tls.clientCertSecretName (docs/install.md, \"NATS\"), or nats.allowUnauthenticated=true for a NATS no other pod can reach" .svc .svc) -}}
{{- end -}}
- --nats-url={{ join "," $n.urls }}
- --stream-replicas={{ $n.streamReplicas }}
{{- if $creds }}
- --nats-credentials={{ include "verdict.natsDir" . }}/credentials/{{ $n.credentials.key }}
{{- end }}
{{- if $nkey }}
- --nats-nkey-file={{ include "verdict.natsDir" . }}/nkey/{{ $n.nkey.key }}
{{- end }}
{{- if or $n.tls.caSecretName $n.tls.caConfigMapName }}
- --nats-ca-file={{ include "verdict.natsDir" . }}/ca/{{ $n.tls.caKey }}
{{- end }}
{{- if $n.tls.clientCertSecretName }}
- --nats-cert-file={{ include "verdict.natsDir" . }}/client/tls.crt
- --nats-key-file={{ include "verdict.natsDir" . }}/client/tls.key
{{- end }}
{{- with $n.streams }}
{{- if not (kindIs "invalid" .resultHistory) }}
- --result-history={{ .resultHistory }}
{{- end }}
{{- if .resultsMaxBytes }}
- --results-max-bytes={{ .resultsMaxBytes }}
{{- end }}
{{- if not (kindIs "invalid" .workMaxMessages) }}
- --work-max-messages={{ .workMaxMessages | int64 }}
{{- end }}
{{- if .workMaxBytes }}
- --work-max-bytes={{ .workMaxBytes }}
{{- end }}
{{- if .decisionsMaxAge }}
- --decisions-max-age={{ .decisionsMaxAge }}
{{- end }}
{{- if .decisionsMaxBytes }}
- --decisions-max-bytes={{ .decisionsMaxBytes }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The NATS volume mounts: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.natsMounts" -}}
{{- $n := .root.Values.nats }}
{{- if include "verdict.natsCredentials" . }}
- name: nats-credentials
  mountPath: {{ include "verdict.natsDir" . }}/credentials
  readOnly: true
{{- end }}
{{- if include "verdict.natsNKey" . }}
- name: nats-nkey
  mountPath: {{ include "verdict.natsDir" . }}/nkey
  readOnly: true
{{- end }}
{{- if or $n.tls.caSecretName $n.tls.caConfigMapName }}
- name: nats-ca
  mountPath: {{ include "verdict.natsDir" . }}/ca
  readOnly: true
{{- end }}
{{- if $n.tls.clientCertSecretName }}
- name: nats-client
  mountPath: {{ include "verdict.natsDir" . }}/client
  readOnly: true
{{- end }}
{{- end -}}

{{/* The NATS volumes: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.natsVolumes" -}}
{{- $n := .root.Values.nats }}
{{- with include "verdict.natsCredentials" . }}
- name: nats-credentials
  secret:
    secretName: {{ . }}
    items:
      - key: {{ $n.credentials.key }}
        path: {{ $n.credentials.key }}
{{- end }}
{{- with include "verdict.natsNKey" . }}
- name: nats-nkey
  secret:
    secretName: {{ . }}
    items:
      - key: {{ $n.nkey.key }}
        path: {{ $n.nkey.key }}
{{- end }}
{{- if $n.tls.caSecretName }}
- name: nats-ca
  secret:
    secretName: {{ $n.tls.caSecretName }}
    items:
      - key: {{ $n.tls.caKey }}
        path: {{ $n.tls.caKey }}
{{- else if $n.tls.caConfigMapName }}
- name: nats-ca
  configMap:
    name: {{ $n.tls.caConfigMapName }}
    items:
      - key: {{ $n.tls.caKey }}
        path: {{ $n.tls.caKey }}
{{- end }}
{{- if $n.tls.clientCertSecretName }}
- name: nats-client
  secret:
    secretName: {{ $n.tls.clientCertSecretName }}
{{- end }}
{{- end -}}

{{/* Environment every service gets: its pod name, and the Go runtime's
memory limit just under the container's. */}}
{{- define "verdict.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
      divisor: "1"
{{- end -}}

{{/* The pod's scheduling: (dict "root" $ "svc" "webhook"). Zone spread
(ScheduleAnyway, pod-template-hash among the matched keys) and preferred
anti-affinity across nodes, unless replaced. */}}
{{- define "verdict.scheduling" -}}
{{- $svc := (index .root.Values .svc).scheduling | default (dict) -}}
{{- $s := dict -}}
{{- range $k, $v := .root.Values.scheduling -}}
{{- $_ := set $s $k (ternary (index $svc $k) $v (hasKey $svc $k)) -}}
{{- end -}}
{{- with $s.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $s.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $s.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $s.affinity }}
affinity:
  {{- toYaml $s.affinity | nindent 2 }}
{{- else if $s.nodeAntiAffinity }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "verdict.selectorLabels" . | nindent 14 }}
{{- end }}
{{- if $s.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $s.topologySpreadConstraints | nindent 2 }}
{{- else if $s.zoneSpread }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    matchLabelKeys: [pod-template-hash]
    labelSelector:
      matchLabels:
        {{- include "verdict.selectorLabels" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The pod's common spec after the containers: (dict "root" $ "svc" "webhook"). */}}
{{- define "verdict.podCommon" -}}
serviceAccountName: {{ include "verdict.name" . }}
automountServiceAccountToken: true
enableServiceLinks: false
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- include "verdict.scheduling" . }}
{{- end -}}

{{/* A grace period longer than the service's own shutdown bound:
(dict "what" "webhook.shutdownBudgetSeconds" "bound" 25 "grace" 40). */}}
{{- define "verdict.checkGrace" -}}
{{- if le (int .grace) (int .bound) -}}
{{- fail (printf "terminationGracePeriodSeconds %d must be longer than %s (%d): the kubelet would kill the service before it drains" (int .grace) .what (int .bound)) -}}
{{- end -}}
{{- end -}}

{{/* The registries' CA bundle (imageRegistries.caConfigMapName) and the
Sigstore trusted root (imageRegistries.sigstoreTrustedRoot), mounted
where --registry-ca-file and --sigstore-trusted-root read them: $. */}}
{{- define "verdict.registryMounts" -}}
{{- $r := .Values.imageRegistries | default (dict) -}}
{{- if $r.caConfigMapName }}
- name: registry-ca
  mountPath: /etc/verdict/registry-ca
  readOnly: true
{{- end }}
{{- if ($r.sigstoreTrustedRoot | default (dict)).configMapName }}
- name: sigstore-trusted-root
  mountPath: /etc/verdict/sigstore
  readOnly: true
{{- end }}
{{- end -}}

{{- define "verdict.registryVolumes" -}}
{{- $r := .Values.imageRegistries | default (dict) -}}
{{- if $r.caConfigMapName }}
- name: registry-ca
  configMap:
    name: {{ $r.caConfigMapName }}
    items:
      - key: {{ $r.caKey }}
        path: {{ $r.caKey }}
{{- end }}
{{- with $r.sigstoreTrustedRoot }}{{ if .configMapName }}
- name: sigstore-trusted-root
  configMap:
    name: {{ .configMapName }}
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}{{ end }}
{{- end -}}
