// Package k8scheck checks the Kubernetes Indexed Job of examples/convert-parts against
// the Job schema without a cluster: its test decodes the manifest strictly into the
// Kubernetes API types (k8s.io/api/batch/v1), refusing a field the schema does not have,
// and checks what the example relies on. It is a module of its own so that the Kubernetes
// API modules stay out of conveyor's go.mod; .ci/run runs its test.
package k8scheck
