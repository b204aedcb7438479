#!/bin/bash
# Converts an ImageFolder tree into one conveyor dataset with a Slurm job array: array
# task i of N runs "conveyor convert SRC DST --part i/N", converting its own contiguous
# part of SRC's listing into the shared directory DST. No task waits for another and
# there is no merge step: DST opens as soon as every task has finished.
#
#   jobid=$(sbatch --parsable --export=ALL,SRC=/shared/imagenet/train,DST=/shared/datasets/imagenet-256 slurm-array.sh)
#   sbatch --dependency=afterany:$jobid --wrap "conveyor verify /shared/datasets/imagenet-256"
#
# The verify job waits for every task to end however it ended (afterok would never run
# once a task failed, left pending as DependencyNeverSatisfied) and decides: it fails,
# naming each missing or incomplete part. Rerun those tasks with the number of parts
# given, since a rerun's array is not the whole array, then verify again:
#
#   sbatch --array=3,7 --export=ALL,SRC=...,DST=...,PARTS=16 slurm-array.sh
#
# A rerun (or scontrol requeue) of task i converts part i again, resuming where it
# stopped. Arguments after the script go to conveyor convert, after the ones below:
# "sbatch slurm-array.sh --codec jpeg --quality 85" (a later --size or --workers wins).
#
# Adapt to your cluster, on the command line (sbatch --array=0-63 --cpus-per-task=8
# --mem=8G slurm-array.sh overrides the lines below) or by editing them:
#   --array          the number of parts: tasks 0 to N-1 convert N parts. A throttle
#                    (0-15%4) is fine.
#   --cpus-per-task  files decoded at once (--workers), with --mem: a task asking for
#   --mem            more than any node of the partition has never starts (squeue
#                    reason PartitionConfig); sinfo -o "%P %c %m" lists the CPUs and
#                    memory (MB) of each partition's nodes.
#   --time           long enough for one part; a task that runs out is resumed by a rerun.
#   --output         --open-mode=append keeps the log of a requeued task's earlier runs.
#
# DST must be on a file system every node mounts (NFS, Lustre, CephFS, GPFS). DST may
# instead be s3://bucket/prefix: each task converts into a staging directory, then
# uploads its part, with credentials from the AWS configuration (AWS_ENDPOINT_URL for
# MinIO). The staging directory must outlive the task, or a task cancelled mid-upload
# cannot resume (a per-job $TMPDIR is removed when the job ends, cancelled or not), and
# should be on a file system every node mounts, since a rerun may run elsewhere: it is
# $STAGING/part-i-of-N, STAGING by default conveyor-staging/BUCKET_PREFIX in the
# directory sbatch ran in. Delete it once conveyor verify DST passes.
#
#SBATCH --job-name=conveyor-convert
#SBATCH --array=0-15
#SBATCH --cpus-per-task=16
#SBATCH --mem=16G
#SBATCH --time=04:00:00
#SBATCH --output=conveyor-convert-%A_%a.log
#SBATCH --open-mode=append

set -euo pipefail

: "${SRC:?set SRC to the ImageFolder tree to convert}"
: "${DST:?set DST to the dataset directory, shared by every task}"
: "${SLURM_ARRAY_TASK_ID:?not a Slurm array task: submit with sbatch --array=0-N}"
CONVEYOR=${CONVEYOR:-conveyor}

# The number of parts is the array's, 0 to N-1, unless PARTS says otherwise (a rerun).
min=${SLURM_ARRAY_TASK_MIN:-0} max=${SLURM_ARRAY_TASK_MAX:-$SLURM_ARRAY_TASK_ID}
count=${SLURM_ARRAY_TASK_COUNT:-0}
if [ -z "${PARTS:-}" ]; then
	if [ "$min" != 0 ] || [ "$count" != $((max + 1)) ]; then
		echo "slurm-array.sh: the array runs $count tasks from $min to $max, not every part 0 to N-1: a rerun of some tasks? Give the number of parts as PARTS=N (sbatch --export=ALL,...,PARTS=N)" >&2
		exit 2
	fi
	PARTS=$count
elif [ "$max" -ge "$PARTS" ]; then
	echo "slurm-array.sh: array task $max, but PARTS=$PARTS numbers the parts 0 to $((PARTS - 1))" >&2
	exit 2
elif [ "$min" = 0 ] && [ "$count" = $((max + 1)) ] && [ "$count" != "$PARTS" ]; then
	echo "slurm-array.sh: the array runs tasks 0 to $max of PARTS=$PARTS: parts $count to $((PARTS - 1)) are left to another job" >&2
fi

args=(--size "${SIZE:-256}" --workers "${SLURM_CPUS_PER_TASK:-16}" --part "env/$PARTS")
if [[ $DST == s3://* ]]; then
	staging=
	for a in "$@"; do
		case $a in -staging | --staging | -staging=* | --staging=*) staging=given ;; esac
	done
	if [ -z "$staging" ]; then
		name=${DST#s3://}
		name=${name%/}
		STAGING=${STAGING:-${SLURM_SUBMIT_DIR:-$PWD}/conveyor-staging/${name//\//_}}
		args+=(--staging "$STAGING/part-$SLURM_ARRAY_TASK_ID-of-$PARTS")
	fi
fi

exec "$CONVEYOR" convert "$SRC" "$DST" "${args[@]}" "$@"
