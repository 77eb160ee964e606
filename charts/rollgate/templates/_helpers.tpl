{{/* Labels every object carries; the selector labels are manifests/' own. */}}
{{- define "rollgate.labels" -}}
app.kubernetes.io/part-of: rollgate
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* One label scheme per component: every object of the webhook (Deployment, Service,
PDB, RBAC, certificate Jobs) and of the reconciler (Deployment, PDB, RBAC, metrics
Service, ServiceMonitor) carries its pods' name label and the common labels. */}}
{{- define "rollgate.webhookLabels" -}}
app.kubernetes.io/name: rollgate-webhook
{{ include "rollgate.labels" . }}
{{- end }}

{{- define "rollgate.reconcilerLabels" -}}
app.kubernetes.io/name: rollgate-reconciler
{{ include "rollgate.labels" . }}
{{- end }}

{{/* The image: repository@digest when image.digest is set (the digest wins over the
tag), else repository:tag, an empty tag being the chart's appVersion. The repository has
no default: it is where you pushed the image (docs/install.md "Get the image and the
chart"). */}}
{{- define "rollgate.image" -}}
{{- $repository := required "image.repository is required: the registry path you pushed rollgate's image to, e.g. --set image.repository=registry.example.com/rollgate (docs/install.md \"Get the image and the chart\")" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ include "rollgate.imageTag" . }}
{{- end }}
{{- end }}

{{/* image.tag as a string: a tag that YAML reads as a number (`tag: 1.2` in a values
file, `--set image.tag=12`) is accepted by the schema and written as it was given (a
whole number without a decimal point); empty: the chart's appVersion. */}}
{{- define "rollgate.imageTag" -}}
{{- $tag := .Values.image.tag -}}
{{- if and (kindIs "float64" $tag) (eq $tag (floor $tag)) }}{{ $tag = int64 $tag }}{{ end -}}
{{- toString $tag | default .Chart.AppVersion -}}
{{- end }}

{{/* A pod template's labels: the selector label (name) and part-of, which win over
podLabels. (dict "name" <app.kubernetes.io/name> "extra" <podLabels>) */}}
{{- define "rollgate.podLabels" -}}
{{- $own := dict "app.kubernetes.io/name" .name "app.kubernetes.io/part-of" "rollgate" -}}
{{- toYaml (merge $own (.extra | default dict)) }}
{{- end }}

{{/* The scheduling and pod-metadata values of a pod that is not a Deployment's (the
certificate Jobs', the renewal CronJob's, the `helm test` pod's), as YAML: each of
nodeSelector, tolerations, affinity, priorityClassName, podLabels and podAnnotations is
the pod's own (certificates.job.*, selftest.*) unless null, else the webhook's. As
argo-helm's charts fall back to global.* for their hook Jobs, so one setting places
every pod of the release; an empty own value ({}, [], "") means none.
(dict "own" <values> "webhook" .Values.webhook) */}}
{{- define "rollgate.podValues" -}}
{{- $out := dict -}}
{{- range $key := list "nodeSelector" "tolerations" "affinity" "priorityClassName" "podLabels" "podAnnotations" -}}
{{- $v := index $.own $key -}}
{{- if kindIs "invalid" $v }}{{ $v = index $.webhook $key }}{{ end -}}
{{- $_ := set $out $key $v -}}
{{- end -}}
{{- toYaml $out }}
{{- end }}

{{/* A pod spec's priorityClassName, nodeSelector, tolerations and affinity, each only
when set; every pod of the chart takes them from here (a dict holding those keys: the
webhook or reconciler values, or rollgate.podValues). */}}
{{- define "rollgate.podScheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* topologySpreadConstraints; one without labelSelector selects the pods' own name.
(dict "name" <app.kubernetes.io/name> "constraints" <list>) */}}
{{- define "rollgate.topologySpread" -}}
{{- $out := list -}}
{{- range .constraints -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" $.name)) -}}
{{- end -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out }}
{{- end }}

{{/* A probe's timing values (periodSeconds, timeoutSeconds, failureThreshold). */}}
{{- define "rollgate.probeTiming" -}}
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end }}

{{/* A flag with a value, only when the value is set (null: the process's default). */}}
{{- define "rollgate.flag" -}}
{{- $v := index . 1 -}}
{{- if and (kindIs "float64" $v) (eq $v (floor $v)) }}{{ $v = int64 $v }}{{ end -}}
{{- if not (kindIs "invalid" $v) }}
- {{ printf "--%s=%v" (index . 0) $v | quote }}
{{- end }}
{{- end }}

{{/* The webhook's args: docs/components.md, "Webhook". */}}
{{- define "rollgate.webhookArgs" -}}
{{- $w := .Values.webhook -}}
- --bind=0.0.0.0:{{ $w.port }}
- --tls-cert-file=/etc/rollgate/tls/tls.crt
- --tls-key-file=/etc/rollgate/tls/tls.key
{{- include "rollgate.flag" (list "workers" $w.workers) }}
{{- include "rollgate.flag" (list "threads" $w.threads) }}
{{- include "rollgate.flag" (list "lookup-timeout" $w.lookupTimeout) }}
{{- include "rollgate.flag" (list "max-connections" $w.maxConnections) }}
{{- include "rollgate.flag" (list "request-timeout" $w.requestTimeout) }}
{{- include "rollgate.flag" (list "cache-ttl" $w.cacheTTL) }}
{{- include "rollgate.flag" (list "log-level" $w.logLevel) }}
{{- if $w.allowHttpPlugins }}
- --allow-http-plugins
{{- end }}
{{- range $w.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The reconciler's args: docs/components.md, "Reconciler". */}}
{{- define "rollgate.reconcilerArgs" -}}
{{- $r := .Values.reconciler -}}
- --bind-address=0.0.0.0:{{ $r.port }}
{{- if $r.leaderElect }}
- --leader-elect
{{- include "rollgate.flag" (list "lease-duration" $r.leaseDuration) }}
{{- if ne $r.leaderElectionID "rollgate-reconciler" }}
- --leader-election-id={{ $r.leaderElectionID }}
{{- end }}
{{- else }}
- --no-leader-elect
{{- end }}
- --controllers={{ join "," $r.controllers }}
- --stage-verification={{ $r.stageVerification }}
{{- include "rollgate.flag" (list "observe-grace-seconds" $r.observeGraceSeconds) }}
{{- include "rollgate.flag" (list "observe-lag-seconds" $r.observeLagSeconds) }}
{{- if $r.refreshLagging }}
- --refresh-lagging
{{- end }}
{{- if $r.shard }}
- --shard={{ $r.shard }}
{{- end }}
{{- if $r.defaultShard }}
- --default-shard
{{- end }}
{{- if ne $r.pluginsMode "auto" }}
- --plugins-mode={{ $r.pluginsMode }}
{{- end }}
{{- if $r.pluginsCA.configMap }}
- --plugins-ca-file=/etc/rollgate/plugins-ca/{{ $r.pluginsCA.key }}
{{- end }}
{{- include "rollgate.flag" (list "plugins-max-download-bytes" $r.pluginsMaxDownloadBytes) }}
{{- include "rollgate.flag" (list "plugins-download-timeout" $r.pluginsDownloadTimeout) }}
{{- include "rollgate.flag" (list "plugins-arch" $r.pluginsArch) }}
{{- if $r.namespaces }}
- --namespaces={{ join "," $r.namespaces }}
{{- end }}
- --workers={{ $r.workers }}
- --resync-period={{ $r.resyncPeriod }}
{{- if ne $r.rolloutsDeployment "argo-rollouts" }}
- --rollouts-deployment={{ $r.rolloutsDeployment }}
{{- end }}
{{- if $r.allowHttpPlugins }}
- --allow-http-plugins
{{- end }}
{{- include "rollgate.flag" (list "log-level" $r.logLevel) }}
{{- range $r.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The webhook configurations' CA: cert-manager injects it; otherwise caBundle. */}}
{{- define "rollgate.caAnnotations" -}}
{{- if eq .Values.certificates.source "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/rollgate-webhook
{{- end }}
{{- end }}

{{- define "rollgate.clientConfig" -}}
clientConfig:
  service:
    name: rollgate-webhook
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- if and (eq .root.Values.certificates.source "secret") .root.Values.certificates.caBundle }}
  caBundle: {{ .root.Values.certificates.caBundle }}
  {{- end }}
{{- end }}

{{- define "rollgate.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
    {{- range .Values.webhook.excludedNamespaces }}
    - {{ . }}
    {{- end }}
    - {{ .Release.Namespace }}
{{- end }}

{{/* The spec of a Job that runs `rollgate certs` (dict: root, serviceAccount, script;
ttl: the hook Jobs' ttlSecondsAfterFinished; restartPolicy, OnFailure unless given). Its
pod is placed and labelled by certificates.job's pod values, else the webhook's
(rollgate.podValues). The CronJob's Jobs get no TTL and restartPolicy Never, so a failed
run stays, with the pod of each attempt and its log, until its history limit removes it
(with OnFailure the Job controller deletes the pod when the Job fails). */}}
{{- define "rollgate.certsJobSpec" -}}
{{- $ := .root -}}
{{- $pod := include "rollgate.podValues" (dict "own" $.Values.certificates.job "webhook" $.Values.webhook) | fromYaml -}}
backoffLimit: 3
{{- with .ttl }}
ttlSecondsAfterFinished: {{ . }}
{{- end }}
template:
  metadata:
    labels:
      {{- include "rollgate.podLabels" (dict "name" "rollgate-certs" "extra" $pod.podLabels) | nindent 6 }}
    {{- with $pod.podAnnotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    serviceAccountName: {{ .serviceAccount }}
    restartPolicy: {{ .restartPolicy | default "OnFailure" }}
    {{- include "rollgate.podScheduling" $pod | nindent 4 }}
    {{- with $.Values.imagePullSecrets }}
    imagePullSecrets:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with omit ($.Values.webhook.podSecurityContext | default dict) "fsGroup" }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    containers:
    - name: certs
      image: {{ include "rollgate.image" $ }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      command: ["/bin/sh", "-ec"]
      args:
      - {{ .script | quote }}
      env:
      - name: PYTHONDONTWRITEBYTECODE
        value: "1"
      - name: TMPDIR
        value: /tmp
      resources:
        {{- toYaml $.Values.certificates.job.resources | nindent 8 }}
      {{- with $.Values.webhook.containerSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
      - name: tmp
        mountPath: /tmp
    volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 8Mi
{{- end }}
