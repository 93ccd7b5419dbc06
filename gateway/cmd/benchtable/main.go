// Command benchtable prints the table `make bench-compare` shows: for each
// benchmark and metric, the ratio of this tree's median to the baseline's
// first, then each side's minimum, median and maximum over the repetitions.
// It reads the output of `go test -bench` (one file a side, every
// repetition appended) and marks a cost metric more than the threshold
// slower than the baseline. It is a development tool, not part of the
// gateway.
//
// Usage: benchtable [-threshold 1.10] [-fail] BASE.txt NEW.txt
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its exit code: 0, 1 when -fail is set and a metric
// regressed, 2 on a usage or read error.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	threshold := fs.Float64("threshold", 1.10, "a cost metric whose median grew by more than this factor is marked slower")
	fail := fs.Bool("fail", false, "exit 1 when a metric is marked slower")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: benchtable [-threshold 1.10] [-fail] BASE.txt NEW.txt")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 || *threshold <= 1 {
		fs.Usage()
		return 2
	}
	sides := make([]Samples, 2)
	for i, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "benchtable: %v\n", err)
			return 2
		}
		sides[i], err = Parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "benchtable: %s: %v\n", name, err)
			return 2
		}
	}
	rows := Compare(sides[0], sides[1], *threshold)
	Print(stdout, rows)
	if *fail && Regressed(rows) {
		return 1
	}
	return 0
}
