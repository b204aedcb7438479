#!/bin/bash
# Converts an ImageFolder tree into one conveyor dataset with a Slurm job array: array
# task i runs "conveyor convert SRC DST --part i/N", converting its own contiguous part
# of SRC's listing into the shared directory DST. No task waits for another and there is
# no merge step: DST opens as soon as every task has finished. A task that fails or is
# preempted is rerun as it is (scontrol requeue, or sbatch --array=I this script) and
# resumes where it stopped.
#
#   sbatch --export=ALL,SRC=/shared/imagenet/train,DST=/shared/datasets/imagenet-256 slurm-array.sh
#   sbatch --dependency=afterok:JOBID --wrap "conveyor verify /shared/datasets/imagenet-256"
#
# The array must be a contiguous range (0-15, or 1-16, not 0-30:2): --part env takes the
# part as SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN and the number of parts from
# SLURM_ARRAY_TASK_COUNT. A throttle (0-15%4) is fine. DST must be on a file system
# every node mounts (NFS, Lustre, CephFS, GPFS); conveyor verify DST names any part
# that is missing.
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

exec "$CONVEYOR" convert "$SRC" "$DST" \
	--size "${SIZE:-256}" \
	--workers "${SLURM_CPUS_PER_TASK:-16}" \
	--part env
