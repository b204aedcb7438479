// Package convertparts holds launcher manifests that convert one dataset with many
// processes, each running "conveyor convert SRC DST --part i/N": k8s-indexed-job.yaml, a
// Kubernetes Indexed Job, and slurm-array.sh, a Slurm job array. Its tests check that
// they parse and agree on the number of parts and, where sbatch reaches a Slurm cluster
// (.ci/slurm.sh starts one), submit slurm-array.sh, cancel a task, rerun it and verify
// the dataset.
package convertparts
