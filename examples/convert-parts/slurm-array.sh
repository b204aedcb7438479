#!/bin/bash
# Converts an ImageFolder tree into one conveyor dataset with a Slurm job array: array
# task i runs "conveyor convert SRC DST --part i/N", converting its own contiguous part
# of SRC's listing into the shared directory DST. No task waits for another and there is
# no merge step: DST opens as soon as every task has finished. A task that fails or is
# preempted is rerun as it is (scontrol requeue, or sbatch --array=I with the same
# --export, which converts part I) and resumes where it stopped.
#
#   sbatch --export=ALL,SRC=/shared/imagenet/train,DST=/shared/datasets/imagenet-256 slurm-array.sh
#   sbatch --dependency=afterok:JOBID --wrap "conveyor verify /shared/datasets/imagenet-256"
#
# The array must number its tasks 0 to PARTS-1 (PARTS, default 16, must match
# --array=0-15 below): --part env/PARTS takes the part as SLURM_ARRAY_TASK_ID, so a
# rerun of one task converts that task's part. A throttle (0-15%4) is fine. DST must be
# on a file system every node mounts (NFS, Lustre, CephFS, GPFS); conveyor verify DST
# names any part that is missing. DST may instead be s3://bucket/prefix: each task
# converts into a local staging directory (--staging; default under $TMPDIR) and uploads
# its part, with credentials from the AWS configuration (AWS_ENDPOINT_URL for MinIO).
#
#SBATCH --job-name=conveyor-convert
#SBATCH --array=0-15
#SBATCH --cpus-per-task=16
#SBATCH --mem=16G
#SBATCH --time=04:00:00
#SBATCH --output=conveyor-convert-%A_%a.log

set -euo pipefail

: "${SRC:?set SRC to the ImageFolder tree to convert}"
: "${DST:?set DST to the dataset directory, shared by every task}"
CONVEYOR=${CONVEYOR:-conveyor}
PARTS=${PARTS:-16}

exec "$CONVEYOR" convert "$SRC" "$DST" \
	--size "${SIZE:-256}" \
	--workers "${SLURM_CPUS_PER_TASK:-16}" \
	--part "env/$PARTS"
