// Command conveyor benchmarks conveyor's image loader and manages converted datasets.
//
//	conveyor bench [DATASET] [flags]  loader throughput on any dataset (see below)
//	conveyor convert SRC DST [flags]  decode and resize an ImageFolder tree into a cache directory
//	conveyor inspect DATASET [--json] describe a dataset: a cache directory, shards, a tree, a manifest
//	conveyor show DATASET [flags]     a contact sheet PNG of a batch after the recipe's augmentations
//	conveyor verify DATASET           check every record, sample or image file of a dataset, listing the bad ones
//	conveyor version                  the module version, VCS revision and Go version
//
// A DATASET is what source.Open reads: an ImageFolder tree (DIR/CLASS/*.jpg), a converted
// dataset (conveyor convert's DST), a manifest (.csv, .jsonl), a folder of WebDataset .tar
// shards, a shard pattern ('DIR/train-{000..099}.tar') or an s3:// or http(s):// URL.
//
// Run "conveyor <command> --help" for a command's flags. A usage error (unknown flag, bad
// value, missing argument, unknown command) exits 2, any other error 1. Ctrl-C (SIGINT)
// or SIGTERM stops a command within moments, its requests to a store included: it
// removes its temporary files and exits 1 saying it was interrupted; a second one kills
// it at once.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

func usage(w io.Writer) {
	fmt.Fprintf(w, `usage: conveyor <command> [arguments]

commands:
  bench [DATASET]   measure loader throughput (images/s) on a DATASET (below); without
                    one, on a built-in synthetic ImageNet-like set;
                    --stages names the bottleneck, --step 30ms the consumer's wait,
                    --workers 1,2,4 sweeps and plots
  convert SRC DST   decode every image of the ImageFolder tree SRC, resize it (shorter
                    side 256 by default) and store its pixels in the cache directory DST;
                    resumable, bad files listed in DST/%s
  inspect DATASET   describe a cache directory: spec, codec, samples, classes, sizes, bytes
                    (--prune deletes other specs' shards); WebDataset shards: shards,
                    samples, per-shard counts; a tree or manifest: samples, classes, formats
  show DATASET      write a contact sheet PNG: a batch after the recipe's augmentations
                    (and mixing), each sample with its label
  verify DATASET    read every record of a cache directory and list the damaged ones; every
                    sample of WebDataset shards, or decode every file of a tree or manifest,
                    and list the bad ones
  version           print the module version, VCS revision and Go version
  help [COMMAND]    print this, or a command's flags

A DATASET is an ImageFolder tree, one folder per class: DIR/CLASS/*.jpg (any depth below
CLASS; .jpg .jpeg .png .gif .bmp .tif .tiff .webp; an empty class folder is refused
without --allow-empty-classes); a converted dataset (conveyor convert's DST); a manifest
(.csv of path,label or .jsonl); a folder of WebDataset .tar shards, or a shard pattern
('DIR/train-{000..099}.tar'); or an s3:// or http(s):// URL of shards or a converted
dataset.

Run "conveyor <command> --help" for a command's flags.
`, reportName)
}

// commands are the subcommands, each run with its arguments after the command name.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"bench":   benchTo,
	"convert": convert,
	"inspect": inspect,
	"show":    show,
	"verify":  verify,
	"version": version,
}

// commandNames lists the commands in the order usage gives them.
const commandNames = "bench, convert, inspect, show, verify, version, help"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args (without the program name) and returns the exit status:
// 0, 1 for an error, 2 for a usage error. Errors are printed on stderr as one line,
// "conveyor COMMAND: ...", a usage error followed by a line saying where the usage is.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return fail(stderr, "", usagef("missing command (one of %s)", commandNames))
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			usage(stdout)
			return 0
		}
		if _, ok := commands[rest[0]]; ok && len(rest) == 1 {
			return run([]string{rest[0], "--help"}, stdout, stderr)
		}
		return fail(stderr, "", usagef("help: no command %q (commands: %s)", strings.Join(rest, " "), commandNames))
	case "--version", "-version":
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		return fail(stderr, "", usagef("unknown command %q (commands: %s)", name, commandNames))
	}
	return fail(stderr, name, cmd(rest, stdout, stderr))
}

// fail prints err, if any, for the command name ("" when there is none) and returns the
// exit status it calls for.
func fail(stderr io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) { // --help printed the command's usage
		return 0
	}
	prefix := "conveyor"
	if name != "" {
		prefix += " " + name
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	if !errors.As(err, new(usageError)) {
		return 1
	}
	if name == "" || name == "version" {
		fmt.Fprintln(stderr, "Run 'conveyor help' for usage.")
	} else {
		fmt.Fprintf(stderr, "Run 'conveyor help' (or 'conveyor %s --help') for usage.\n", name)
	}
	return 2
}

// version prints the module version, the VCS revision the binary was built from and the
// Go version, as recorded in the binary's build information.
func version(args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprintln(stdout, "usage: conveyor version\n\nPrints the module version, the VCS revision and time the binary was built from, and the Go version.")
			return flag.ErrHelp
		}
		return usagef("version takes no arguments, got %q", args)
	}
	fmt.Fprint(stdout, versionText())
	return nil
}

func versionText() string {
	mod, rev, when, modified := "(unknown)", "", "", false
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "conveyor %s\n", mod)
	if rev == "" {
		b.WriteString("revision unknown (the build recorded no VCS information)\n")
	} else {
		fmt.Fprintf(&b, "revision %s", rev)
		if when != "" {
			fmt.Fprintf(&b, " (%s)", when)
		}
		if modified {
			b.WriteString(" with uncommitted changes")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
