{{/* A worker's Deployment (reporter, generator, cleaner):
(dict "root" $ "svc" "reporter" "args" "<its own flags, a YAML list>"
["ports" "<more container ports, a YAML list>"]). */}}
{{- define "verdict.workerDeployment" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
{{- $v := index .root.Values .svc -}}
{{- include "verdict.checkGrace" (dict "what" (printf "%s.shutdownTimeoutSeconds" .svc) "bound" $v.shutdownTimeoutSeconds "grace" $v.terminationGracePeriodSeconds) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "verdict.name" $ctx }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
spec:
  replicas: {{ $v.replicas }}
  revisionHistoryLimit: 5
  strategy:
    {{- toYaml $v.strategy | nindent 4 }}
  selector:
    matchLabels:
      {{- include "verdict.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "verdict.componentLabels" $ctx | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "verdict.podCommon" $ctx | nindent 6 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      containers:
        - name: {{ .svc }}
          image: {{ include "verdict.image" $ctx }}
          imagePullPolicy: {{ .root.Values.image.pullPolicy }}
          args:
            {{- .args | nindent 12 }}
            - --probe-address=:{{ $v.probePort }}
            {{- include "verdict.natsArgs" $ctx | nindent 12 }}
            {{- with include "verdict.policyHTTPArgs" .root }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- if eq .svc "reporter" }}
            {{- with include "verdict.registryArgs" .root | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- end }}
            {{- with include "verdict.policyAPIArgs" .root | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- if has .svc (list "reporter" "generator") }}
            {{- with include "verdict.exceptionArgs" .root | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- end }}
            {{- include "verdict.evaluationLimitArgs" .root | nindent 12 }}
            {{- include "verdict.logArgs" $ctx | nindent 12 }}
            {{- with $v.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            {{- include "verdict.env" .root | nindent 12 }}
          ports:
            - name: probes
              containerPort: {{ $v.probePort }}
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          # Ready: connected to NATS (service.NATSReady); the reporter's
          # serving mode: its report index has caught up with the stream.
          readinessProbe:
            httpGet:
              path: /readyz
              port: probes
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          livenessProbe:
            httpGet:
              path: /healthz
              port: probes
            initialDelaySeconds: 10
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 6
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml .root.Values.securityContext | nindent 12 }}
          {{- $mounts := include "verdict.natsMounts" $ctx }}
          {{- if eq .svc "reporter" }}
          {{- $mounts = printf "%s\n%s" $mounts (include "verdict.registryMounts" .root) }}
          {{- end }}
          {{- with ($mounts | trim) }}
          volumeMounts:
            {{- . | nindent 12 }}
          {{- end }}
      {{- $volumes := include "verdict.natsVolumes" $ctx }}
      {{- if eq .svc "reporter" }}
      {{- $volumes = printf "%s\n%s" $volumes (include "verdict.registryVolumes" .root) }}
      {{- end }}
      {{- with ($volumes | trim) }}
      volumes:
        {{- . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* A service's ServiceAccount, ClusterRole and binding:
(dict "root" $ "svc" "reporter" "rules" "<rules, a YAML list>"). */}}
{{- define "verdict.clusterRBAC" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
{{- $name := include "verdict.name" $ctx -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
rules:
  {{- .rules | trim | nindent 2 }}
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
    name: {{ $name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* A service's PodDisruptionBudget: (dict "root" $ "svc" "reporter"). */}}
{{- define "verdict.pdb" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
{{- $v := index .root.Values .svc -}}
{{- if $v.pdb.enabled -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "verdict.name" $ctx }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "verdict.componentLabels" $ctx | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "verdict.selectorLabels" $ctx | nindent 6 }}
{{- end -}}
{{- end -}}
