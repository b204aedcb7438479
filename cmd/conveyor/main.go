// Command conveyor benchmarks conveyor's image loader and manages converted datasets.
//
//	conveyor bench [DIR] [flags]      loader throughput on an ImageFolder tree or a converted dataset
//	conveyor convert SRC DST [flags]  decode and resize an ImageFolder tree into a cache directory
//	conveyor inspect DIR [--json]     describe a cache directory
//	conveyor verify DIR               check every record of a cache directory
//
// Run "conveyor <command> -h" for a command's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: conveyor <command> [arguments]

commands:
  bench [DIR]       measure loader throughput (images/s) on an ImageFolder tree or a
                    converted dataset; without DIR, on a built-in synthetic ImageNet-like set;
                    --stages names the bottleneck, --step 30ms the consumer's wait,
                    --workers 1,2,4 sweeps and plots
  convert SRC DST   decode every image of the ImageFolder tree SRC, resize it (shorter
                    side 256 by default) and store its pixels in the cache directory DST;
                    resumable, bad files listed in DST/%s
  inspect DIR       describe a cache directory: spec, codec, samples, classes, sizes, bytes
  verify DIR        read every record of a cache directory and list the damaged ones

Run "conveyor <command> -h" for a command's flags.
`, reportName)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "bench":
		err = bench(args, os.Stdout)
	case "convert":
		err = convert(args, os.Stdout, os.Stderr)
	case "inspect":
		err = inspect(args, os.Stdout, os.Stderr)
	case "verify":
		err = verify(args, os.Stdout, os.Stderr)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "conveyor: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the command printed its usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conveyor:", err)
		os.Exit(1)
	}
}
