package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// usageError is an error in the command line (an unknown flag, a bad value, a missing
// argument): run prints it with a pointer to the usage and exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// parseFlags parses args as parseArgs does. On -h or --help it prints fs's full usage on
// stdout and returns flag.ErrHelp; any other parse error is a usageError of one line, with
// nothing printed (fs.Usage is for --help only).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	usage := fs.Usage
	fs.SetOutput(io.Discard) // the flag package prints the error and the usage: run prints one line
	fs.Usage = func() {}
	pos, err := parseArgs(fs, args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, err
	case err != nil:
		return nil, usageError{flagError(fs, err)}
	}
	return pos, nil
}

// flagError rewrites the flag package's messages to name flags as the usage writes them,
// with two dashes: "unknown flag --foo" rather than "flag provided but not defined: -foo".
//
// The flag package ends a value it cannot parse with "parse error": that is replaced by
// what the flag wants, "a whole number" for --size.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m, ok := strings.CutSuffix(msg, ": parse error"); ok {
		msg = m + ": want " + flagWants(fs, m)
		err = errors.New(msg)
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Errorf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("flag --%s needs a value", name)
	}
	for _, in := range []string{" for flag -", " for -"} {
		if before, after, ok := strings.Cut(msg, in); ok {
			return errors.New(before + in + "-" + after)
		}
	}
	return err
}

// flagWants names the kind of value the flag that msg (the flag package's message, up
// to its ": parse error") names takes, from the flag's value.
func flagWants(fs *flag.FlagSet, msg string) string {
	i := strings.LastIndex(msg, " -")
	if i < 0 {
		return "a valid value"
	}
	f := fs.Lookup(strings.TrimLeft(msg[i+1:], "-"))
	if f == nil {
		return "a valid value"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "a valid value"
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return "a whole number, such as " + f.DefValue
	case float64:
		return "a number, such as " + f.DefValue
	case time.Duration:
		return "a duration such as 30ms, 2s or 1m30s"
	case bool:
		return "true or false"
	}
	return "a valid value"
}

// parseArgs parses fs's flags wherever they appear among the positional arguments, so
// "convert SRC DST --size 256" works as well as "convert --size 256 SRC DST". Everything
// after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// byteSize is a flag holding a size in bytes, written as a number with an optional
// suffix: k, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	}
	num, mult := strings.TrimSuffix(strings.TrimSpace(s), "B"), 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*mult >= 1<<63 {
		return fmt.Errorf("not a size in bytes: %q (want e.g. 500000000, 500M or 1.5Gi)", s)
	}
	*b = byteSize(f * mult)
	return nil
}

// intList is a flag holding one or more positive integers separated by commas, such as
// "1,2,4": a list sweeps the setting.
type intList []int

// A list of one 0 is the unset value of --workers and --prefetch (the loader tunes
// them); it prints as nothing, as the flag package prints a nil list, so that --help
// gives only the flag's own "default: tuned" and not "(default 0)" after it.
func (l *intList) String() string {
	if len(*l) == 1 && (*l)[0] == 0 {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	var vals []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		vals = append(vals, v)
	}
	*l = vals
	return nil
}
