// Command allocd is the allocd daemon and its tools:
//
//	allocd serve     run the daemon (HTTP API, plugin folder watched for changes)
//	allocd allocate  answer JSON Lines allocation requests on stdin with a plugin
//	allocd check     prove a plugin sound with generated scenarios
//	allocd init-plugin  write a new plugin module
//	allocd history   print a (group, topic)'s generations, their triggers and moves
//	allocd explain   print one queue's owners over the history, and why
//
// Run `allocd COMMAND -h` for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands []command

func register(c command) { commands = append(commands, c) }

// errUsage marks an error the user can fix by reading the usage; it exits with status 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdin, stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				fmt.Fprintf(stderr, "allocd %s: %v\n", c.name, err)
				return 2
			case errors.Is(err, errFailed):
				return 1 // the command has already said why
			default:
				fmt.Fprintf(stderr, "allocd %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "allocd: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errFailed ends a command that has already reported its failure.
var errFailed = errors.New("failed")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: allocd COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// usageErr wraps a message as a usage error.
func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}
