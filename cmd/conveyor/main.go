// Command conveyor benchmarks conveyor's image loader.
//
//	conveyor bench [DIR] [flags]   loader throughput on an ImageFolder tree (default: a built-in synthetic set)
//
// Run "conveyor bench -h" for the flags.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: conveyor <command> [arguments]

commands:
  bench [DIR]   measure loader throughput (images/s) on an ImageFolder tree;
                without DIR, on a built-in synthetic ImageNet-like set

Run "conveyor <command> -h" for a command's flags.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "bench":
		err = bench(os.Args[2:], os.Stdout)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "conveyor: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conveyor:", err)
		os.Exit(1)
	}
}
