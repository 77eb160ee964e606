// The floor of any admission webhook, for bench/apply_overhead.py: a Go webhook that
// answers every AdmissionReview with an allow. Standard library only.
module rollgate.dev/hack/noop-webhook

go 1.24.9
