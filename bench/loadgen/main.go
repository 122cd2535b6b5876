// loadgen drives the oversell gateway for the benchmarks: simulated agents,
// webhook reviews and query calls from a compiled client, so the numbers
// measure the gateway rather than a Node load generator sharing its two cores.
//
// Every subcommand logs progress to stderr and prints its outcome as one
// `result <json>` line on stdout, which the TypeScript harness parses.
//
// Build: cd bench/loadgen && go build -o <out>/loadgen .
// The gRPC contract is read at run time (--proto), so nothing is generated.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
)

const usage = `usage: loadgen <subcommand> [flags]

subcommands:
  agents        N simulated node agents, one gRPC connection each, one sample per interval
  reviews       open-loop HTTPS AdmissionReviews on the mutating webhook
  query         open-loop GetNode calls on the query API over one connection
  bare-webhook  reference HTTPS server answering a fixed AdmissionReview

run "loadgen <subcommand> -h" for its flags`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	run := map[string]func([]string){
		"agents":       runAgents,
		"reviews":      runReviews,
		"query":        runQuery,
		"bare-webhook": runBare,
	}[os.Args[1]]
	if run == nil {
		fmt.Fprintf(os.Stderr, "loadgen: unknown subcommand %q\n\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	run(os.Args[2:])
}

// newFlags makes a subcommand's flag set; parse errors exit 2 after printing
// the flags, which is what someone who mistyped one needs to see.
func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet("loadgen "+name, flag.ExitOnError)
}

// stdout carries the lines the harness parses (ready, result); a lock keeps
// lines written from different goroutines whole.
var stdoutMu sync.Mutex

func say(format string, args ...any) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
}

// fatalf is for setup errors: the message says what failed and what to do.
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(1)
}

func printResult(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fatalf("cannot encode the result: %v", err)
	}
	say("result %s", b)
}
