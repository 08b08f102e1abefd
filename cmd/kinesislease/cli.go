package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1 // a runtime or AWS error
	exitUsage    = 2 // bad usage or arguments
	exitNotFound = 3 // the table, the stream or the shard does not exist
	exitDenied   = 4 // access denied
)

// cli is one invocation of the command.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	now            func() time.Time
	// Extra client options (tests record and disturb calls with them).
	dynamoOpts  []func(*dynamodb.Options)
	kinesisOpts []func(*kinesis.Options)
	// sleep waits d (members --interval); nil: backoff.Sleep. Tests act between
	// the reads with it.
	sleep func(ctx context.Context, d time.Duration) error
}

func (c *cli) wait(d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(c.ctx, d)
	}
	return backoff.Sleep(c.ctx, d)
}

// run runs the command line args (without the program name), writing to
// stdout and stderr, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{ctx: context.Background(), stdout: stdout, stderr: stderr, now: time.Now}
	return c.execute(args)
}

// execute runs the command line args (without the program name) and
// returns the exit code.
func (c *cli) execute(args []string) int {
	if len(args) == 0 {
		return c.usageError(nil, "the following arguments are required: command")
	}
	switch cmd := args[0]; cmd {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			fmt.Fprint(c.stdout, topHelp)
			return exitOK
		}
		if len(args) > 2 {
			return c.usageError(nil, fmt.Sprintf("unknown options: %s", strings.Join(args[2:], " ")))
		}
		sc := commandNamed(args[1])
		if sc == nil {
			return c.usageError(nil, invalidChoice(args[1]))
		}
		fmt.Fprint(c.stdout, sc.help)
		return exitOK
	default:
		sc := commandNamed(cmd)
		if sc == nil {
			return c.usageError(nil, invalidChoice(cmd))
		}
		return sc.run(c, args[1:])
	}
}

// command is a subcommand.
type command struct {
	name     string
	synopsis string // one line, for usage errors
	help     string
	run      func(c *cli, args []string) int
}

// commands are the subcommands, filled in by init (main.go).
var commands []*command

// invalidChoice is the usage error of an unknown command name.
func invalidChoice(name string) string {
	var names []string
	for _, sc := range commands {
		names = append(names, sc.name)
	}
	return fmt.Sprintf("argument command: invalid choice: %q (choose from %s, help)", name, strings.Join(names, ", "))
}

func commandNamed(name string) *command {
	for _, sc := range commands {
		if sc.name == name {
			return sc
		}
	}
	return nil
}

// usageError prints the usage (of cmd, or of the command line) and the
// error, AWS CLI style, and returns exitUsage.
func (c *cli) usageError(cmd *command, msg string) int {
	prog := "kinesislease"
	if cmd != nil {
		fmt.Fprintf(c.stderr, "usage: kinesislease %s\n", cmd.synopsis)
		prog += " " + cmd.name
	} else {
		fmt.Fprintln(c.stderr, "usage: kinesislease <command> [options]")
	}
	fmt.Fprintln(c.stderr, "To see help text, you can run:")
	fmt.Fprintln(c.stderr)
	fmt.Fprintln(c.stderr, "  kinesislease help")
	if cmd != nil {
		fmt.Fprintf(c.stderr, "  kinesislease %s help\n", cmd.name)
	} else {
		fmt.Fprintln(c.stderr, "  kinesislease <command> help")
	}
	fmt.Fprintln(c.stderr)
	fmt.Fprintf(c.stderr, "%s: error: %s\n", prog, msg)
	return exitUsage
}

// parse parses a subcommand's flags. It returns done (with the exit code)
// when there is nothing more to do: help was asked for, or the command line
// is wrong.
func (c *cli) parse(cmd *command, fs *flag.FlagSet, args []string) (done bool, code int) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, cmd.help)
			return true, exitOK
		}
		return true, c.usageError(cmd, flagError(err))
	}
	if fs.NArg() == 1 && fs.Arg(0) == "help" {
		fmt.Fprint(c.stdout, cmd.help)
		return true, exitOK
	}
	if fs.NArg() > 0 {
		return true, c.usageError(cmd, "unknown options: "+strings.Join(fs.Args(), " "))
	}
	return false, exitOK
}

// flagError rewrites the flag package's messages in the AWS CLI's words.
func flagError(err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		return "unknown options: --" + name
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		return fmt.Sprintf("argument --%s: expected one argument", name)
	case strings.HasPrefix(msg, "invalid value "):
		return "argument " + strings.Replace(strings.TrimPrefix(msg, "invalid value "), " for flag -", " for --", 1)
	}
	return msg
}

// argError is a bad argument found after parsing (exit code 2).
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func badArg(format string, args ...any) error { return &argError{msg: fmt.Sprintf(format, args...)} }

// exitCode maps an error onto the documented exit codes.
func exitCode(err error) int {
	var (
		arg       *argError
		dNotFound *dtypes.ResourceNotFoundException
		kNotFound *ktypes.ResourceNotFoundException
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &arg):
		return exitUsage
	case errors.Is(err, kltype.ErrShardNotFound), errors.As(err, &dNotFound), errors.As(err, &kNotFound):
		return exitNotFound
	case kinesisx.IsAccessDenied(err):
		return exitDenied
	}
	return exitError
}

// fail prints err for command cmd and returns its exit code.
func (c *cli) fail(cmd string, err error) int {
	code := exitCode(err)
	// The library's errors start with its name: said once is enough.
	fmt.Fprintf(c.stderr, "kinesislease %s: %s\n", cmd, strings.TrimPrefix(err.Error(), "kinesislease: "))
	if code == exitUsage {
		fmt.Fprintf(c.stderr, "(see: kinesislease %s help)\n", cmd)
	}
	return code
}
