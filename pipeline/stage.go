package pipeline

import "fmt"

// Stage names the stages a sample goes through, for Config.StopAfter.
type Stage int

const (
	AllStages    Stage = iota // read, decode, augment and pack: the full pipeline
	ReadStage                 // read the file (or the cached record) whole
	DecodeStage               // decode and resize first (or decode the cached record); with crop-aware decoding, also the first op's crop
	AugmentStage              // run Config.Augment
)

func (s Stage) String() string {
	switch s {
	case AllStages:
		return "all"
	case ReadStage:
		return "read"
	case DecodeStage:
		return "decode"
	case AugmentStage:
		return "augment"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Set sets s from its name: read, decode, augment or all (s is a flag.Value).
func (s *Stage) Set(name string) error {
	for v := AllStages; v <= AugmentStage; v++ {
		if v.String() == name {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("pipeline: unknown stage %q (want read, decode, augment or all)", name)
}
