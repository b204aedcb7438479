// Package convertparts holds launcher manifests that convert one dataset with many
// processes, each running "conveyor convert SRC DST --part i/N": k8s-indexed-job.yaml, a
// Kubernetes Indexed Job, and slurm-array.sh, a Slurm job array. Its test checks that
// they parse and agree on the number of parts.
package convertparts
