package pipeline

import (
	"fmt"
	"log"
	"os"
	"strconv"
)

// launcher names the environment variables one launcher sets for each process.
type launcher struct {
	name               string
	rank, world, local string // required, required, optional
	localWorld         string // optional: processes on this node
	worldAlias         string // read when world is not set
}

// launchers are read in this order: torchrun inside a Slurm allocation sets both, and its
// RANK, one per process, is the one that counts.
var launchers = []launcher{
	{name: "torchrun", rank: "RANK", world: "WORLD_SIZE", local: "LOCAL_RANK", localWorld: "LOCAL_WORLD_SIZE"},
	{name: "Slurm", rank: "SLURM_PROCID", world: "SLURM_NTASKS", local: "SLURM_LOCALID", localWorld: "SLURM_NTASKS_PER_NODE", worldAlias: "SLURM_NPROCS"},
}

// ranksFromEnv reads this process's rank, the world size and its rank on the node from
// the variables a launcher sets: torchrun's (and torch.distributed.launch's) RANK,
// WORLD_SIZE and LOCAL_RANK, or else Slurm's SLURM_PROCID, SLURM_NTASKS (or
// SLURM_NPROCS) and SLURM_LOCALID, as srun sets them for each task. ok is false when
// neither launcher's rank or world variable is set. local is 0 when the launcher did not
// say. A value that is not a non-negative integer, a rank without its world size (or the
// other way round), a rank not below the world size, or a local rank not below
// LOCAL_WORLD_SIZE (SLURM_NTASKS_PER_NODE, when a single number) is an error naming the
// variable. Config.Order.RanksFromEnv makes New use it.
func ranksFromEnv() (rank, world, local int, ok bool, err error) {
	for _, l := range launchers {
		rs, hasRank := os.LookupEnv(l.rank)
		worldVar := l.world
		ws, hasWorld := os.LookupEnv(worldVar)
		if !hasWorld && l.worldAlias != "" {
			worldVar = l.worldAlias
			ws, hasWorld = os.LookupEnv(worldVar)
		}
		if !hasRank && !hasWorld {
			continue
		}
		if !hasRank {
			return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s is set but %s is not: a %s launch sets both", worldVar, ws, l.rank, l.name)
		}
		if !hasWorld {
			return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s is set but %s is not: a %s launch sets both", l.rank, rs, l.world, l.name)
		}
		if rank, err = envInt(l.rank, rs); err != nil {
			return 0, 0, 0, false, err
		}
		if world, err = envInt(worldVar, ws); err != nil {
			return 0, 0, 0, false, err
		}
		if world < 1 {
			return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s: the world size must be at least 1", worldVar, ws)
		}
		if rank >= world {
			return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s is not below %s=%s", l.rank, rs, worldVar, ws)
		}
		if ls, has := os.LookupEnv(l.local); has {
			if local, err = envInt(l.local, ls); err != nil {
				return 0, 0, 0, false, err
			}
			if local > rank {
				// Every process before this one on its node has a smaller global rank.
				return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s is above %s=%s: a process's rank on its node cannot exceed its global rank", l.local, ls, l.rank, rs)
			}
			// Slurm writes SLURM_NTASKS_PER_NODE as "4" or, for uneven nodes, "4(x2),3":
			// only a single number is checked.
			if lws, has := os.LookupEnv(l.localWorld); has {
				if lw, perr := strconv.Atoi(lws); perr == nil && local >= lw {
					return 0, 0, 0, false, fmt.Errorf("pipeline: %s=%s is not below %s=%s", l.local, ls, l.localWorld, lws)
				}
			}
		}
		return rank, world, local, true, nil
	}
	return 0, 1, 0, false, nil
}

// envInt parses variable name's value v as a non-negative integer.
func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("pipeline: %s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

// applyRankFromEnv fills c's Rank and World from the launcher's environment, for
// Config.RankFromEnv.
func (c *Config) applyRankFromEnv() error {
	if !c.Order.RanksFromEnv {
		return nil
	}
	if c.Order.Rank != 0 || c.Order.World > 1 {
		return fmt.Errorf("pipeline: config: RankFromEnv is set with Rank %d and World %d; leave them unset to take them from the launcher, or drop RankFromEnv", c.Order.Rank, c.Order.World)
	}
	rank, world, _, ok, err := ranksFromEnv()
	if err != nil {
		return err // names the variable
	}
	if !ok {
		logf := c.Logf
		if logf == nil {
			logf = log.Printf
		}
		logf("pipeline: RankFromEnv: no launcher variables (RANK and WORLD_SIZE, or SLURM_PROCID and SLURM_NTASKS) are set; running as rank 0 of 1")
	}
	c.Order.Rank, c.Order.World = rank, world
	return nil
}
