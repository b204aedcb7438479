package pipeline

import (
	"os"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// launcherVars are every variable RankFromEnv reads.
var launcherVars = []string{
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
}

// setLauncherEnv clears every launcher variable (they may be set where the tests run,
// under Slurm or torchrun) and sets env, for the rest of the test.
func setLauncherEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range launcherVars {
		t.Setenv(k, "") // restores the value at the end of the test
		os.Unsetenv(k)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func TestRankFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name               string
		env                map[string]string
		rank, world, local int
		ok                 bool
		wantErr            string
	}{
		{name: "none", world: 1},
		{name: "torchrun", env: map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, rank: 5, world: 8, local: 1, ok: true},
		{name: "torchrun-without-local", env: map[string]string{"RANK": "0", "WORLD_SIZE": "1"}, rank: 0, world: 1, ok: true},
		{name: "slurm", env: map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "3", "SLURM_NTASKS_PER_NODE": "4"}, rank: 3, world: 4, local: 3, ok: true},
		{name: "slurm-nprocs", env: map[string]string{"SLURM_PROCID": "2", "SLURM_NPROCS": "6", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "3(x2)"}, rank: 2, world: 6, ok: true},
		{name: "torchrun-in-slurm", env: map[string]string{"RANK": "7", "WORLD_SIZE": "16", "LOCAL_RANK": "3", "SLURM_PROCID": "1", "SLURM_NTASKS": "4"}, rank: 7, world: 16, local: 3, ok: true},
		{name: "rank-without-world", env: map[string]string{"RANK": "1"}, wantErr: "RANK=1 is set but WORLD_SIZE is not"},
		{name: "world-without-rank", env: map[string]string{"SLURM_NTASKS": "4"}, wantErr: "SLURM_NTASKS=4 is set but SLURM_PROCID is not"},
		{name: "malformed-rank", env: map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, wantErr: `RANK="one" is not a non-negative integer`},
		{name: "negative-world", env: map[string]string{"RANK": "0", "WORLD_SIZE": "-2"}, wantErr: `WORLD_SIZE="-2" is not a non-negative integer`},
		{name: "zero-world", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}, wantErr: "SLURM_NTASKS=0: the world size must be at least 1"},
		{name: "rank-too-large", env: map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, wantErr: "RANK=4 is not below WORLD_SIZE=4"},
		{name: "malformed-local", env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": " 1"}, wantErr: `SLURM_LOCALID=" 1" is not a non-negative integer`},
		{name: "local-above-rank", env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2"}, wantErr: "LOCAL_RANK=2 is above RANK=1"},
		{name: "local-too-large", env: map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, wantErr: "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setLauncherEnv(t, tc.env)
			rank, world, local, ok, err := RankFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rank != tc.rank || world != tc.world || local != tc.local || ok != tc.ok {
				t.Errorf("got rank %d world %d local %d ok %t, want %d %d %d %t", rank, world, local, ok, tc.rank, tc.world, tc.local, tc.ok)
			}
		})
	}
}

func TestConfigRankFromEnv(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := orderConfig(4, 0, 0, 4)
	cfg.RankFromEnv = true

	setLauncherEnv(t, map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
	ld := newLoader(t, src, cfg)
	if got := ld.Config(); got.Rank != 3 || got.World != 4 || !strings.Contains(got.String(), "rank=3/4") {
		t.Errorf("from torchrun's variables: rank %d of %d (%s)", got.Rank, got.World, got.String())
	}
	if cfg.Rank != 0 || cfg.World != 0 {
		t.Error("New changed the caller's Config")
	}

	setLauncherEnv(t, map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "4"})
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "SLURM_PROCID=9 is not below SLURM_NTASKS=4") {
		t.Errorf("New with a bad SLURM_PROCID: %v", err)
	}

	setLauncherEnv(t, nil)
	var logged string
	cfg.Logf = func(format string, args ...any) { logged += format }
	ld = newLoader(t, src, cfg)
	if got := ld.Config(); got.Rank != 0 || got.World != 1 || !strings.Contains(logged, "no launcher variables") {
		t.Errorf("without a launcher: rank %d of %d, logged %q", got.Rank, got.World, logged)
	}

	cfg.World, cfg.Rank = 2, 1
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "RankFromEnv is set with Rank 1 and World 2") {
		t.Errorf("New with RankFromEnv and World: %v", err)
	}
}
