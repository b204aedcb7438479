// Command buildlib builds the stand-in CUDA driver (package gputest) and prints the path of
// the library, for scripts that run conveyor against it with CONVEYOR_LIBCUDA, as
// bench/gpu.sh --dry-run does.
package main

import (
	"fmt"
	"os"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
)

func main() {
	p, err := gputest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildlib:", err)
		os.Exit(1)
	}
	fmt.Println(p)
}
