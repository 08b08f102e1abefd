package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/migrate"
)

const (
	importSynopsis = "import --table <value> --stream <value> [--lease-namespace <value>] --from-table <value> [--format kcl|vmware-go-kcl] " +
		"[--kcl-stream <value>] [--at-timestamp <value>] [--interval <value>] [--dry-run] [--force] [global options]"
	exportSynopsis = "export --table <value> --stream <value> [--lease-namespace <value>] --to-table <value> [--kcl-stream <value>] " +
		"[--interval <value>] [--dry-run] [--force] [global options]"
)

// exitRefused: the safety checks of import or export refused to write.
const exitRefused = 5

// migrateFlags are the options import and export share.
type migrateFlags struct {
	g         globals
	table     string // the foreign table: --from-table or --to-table
	kclStream string
	interval  time.Duration
	dry       bool
	force     bool
}

func (f *migrateFlags) register(fs *flag.FlagSet, tableFlag string) {
	f.g.namespaced = true // --lease-namespace: the rows of a namespaced subscription
	f.g.register(fs)
	fs.StringVar(&f.table, tableFlag, "", "")
	fs.StringVar(&f.kclStream, "kcl-stream", "", "")
	fs.DurationVar(&f.interval, "interval", migrate.DefaultInterval, "")
	fs.BoolVar(&f.dry, "dry-run", false, "")
	fs.BoolVar(&f.force, "force", false, "")
}

// check validates the shared options; tableFlag names the foreign table's.
func (f *migrateFlags) check(tableFlag string) error {
	var missing []string
	for _, a := range []struct{ name, v string }{{"--table", f.g.table}, {"--stream", f.g.stream}, {"--" + tableFlag, f.table}} {
		if a.v == "" {
			missing = append(missing, a.name)
		}
	}
	if len(missing) > 0 {
		return badArg("the following arguments are required: %s", strings.Join(missing, ", "))
	}
	if err := f.g.check(); err != nil {
		return err
	}
	if f.interval <= 0 {
		return badArg("argument --interval %v: want a positive duration such as 10s", f.interval)
	}
	return nil
}

func (f *migrateFlags) options() []migrate.Option {
	opts := []migrate.Option{migrate.WithInterval(f.interval)}
	if f.dry {
		opts = append(opts, migrate.WithDryRun())
	}
	if f.force {
		opts = append(opts, migrate.WithForce())
	}
	return opts
}

// ours is the kinesislease side of s: its rows are those of
// --lease-namespace, if given; Kinesis is called with --stream.
func (f *migrateFlags) ours(s *session) migrate.Ours {
	return migrate.Ours{Store: s.store, Kinesis: s.kin, Stream: s.stream, LeaseNamespace: f.g.namespace}
}

func (c *cli) importCmd(args []string) int {
	cmd := commandNamed("import")
	var f migrateFlags
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	f.register(fs, "from-table")
	format := fs.String("format", "", "")
	at := fs.String("at-timestamp", "", "")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	if err := f.check("from-table"); err != nil {
		return c.usageError(cmd, err.Error())
	}
	opts := f.options()
	switch migrate.Format(*format) {
	case "", migrate.KCL, migrate.VMware:
	default:
		return c.usageError(cmd, fmt.Sprintf("argument --format: invalid choice: %q (choose from kcl, vmware-go-kcl)", *format))
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return c.usageError(cmd, fmt.Sprintf("argument --at-timestamp %q: want an RFC 3339 time such as 2024-05-01T10:00:00Z", *at))
		}
		opts = append(opts, migrate.WithAtTimestamp(t))
	}
	s, err := c.connect(&f.g)
	if err != nil {
		return c.fail("import", err)
	}
	defer s.close()
	if f.dry {
		fmt.Fprintf(c.stdout, "dry run: reading table %q twice, %v apart; nothing is written\n", f.table, f.interval)
	}
	rep, err := migrate.Import(c.ctx,
		migrate.Foreign{Client: s.ddb, Table: f.table, Format: migrate.Format(*format), StreamID: f.kclStream},
		f.ours(s), opts...)
	return c.report("import", rep, err)
}

func (c *cli) exportCmd(args []string) int {
	cmd := commandNamed("export")
	var f migrateFlags
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	f.register(fs, "to-table")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	if err := f.check("to-table"); err != nil {
		return c.usageError(cmd, err.Error())
	}
	s, err := c.connect(&f.g)
	if err != nil {
		return c.fail("export", err)
	}
	defer s.close()
	if f.dry {
		fmt.Fprintf(c.stdout, "dry run: reading table %q and ours twice, %v apart; nothing is written\n", f.table, f.interval)
	}
	rep, err := migrate.Export(c.ctx,
		f.ours(s),
		migrate.Foreign{Client: s.ddb, Table: f.table, Format: migrate.KCL, StreamID: f.kclStream}, f.options()...)
	return c.report("export", rep, err)
}

// report prints every row of rep (what was written, or would be), the
// refusals overridden, and err, and returns the exit code.
func (c *cli) report(cmd string, rep *migrate.Report, err error) int {
	if rep != nil {
		dry := rep.DryRun || errors.Is(err, migrate.ErrRefused)
		for _, r := range rep.Rows {
			fmt.Fprintln(c.stdout, showRow(r, dry))
		}
		for _, f := range rep.Forced {
			fmt.Fprintf(c.stderr, "kinesislease %s: forced past: %v\n", cmd, f)
		}
	}
	if err == nil {
		return exitOK
	}
	var code int
	switch {
	case errors.Is(err, migrate.ErrRefused):
		fmt.Fprintf(c.stderr, "kinesislease %s: refused, nothing written:\n  %s\n", cmd, strings.ReplaceAll(refusals(err), "\n", "\n  "))
		return exitRefused
	case errors.Is(err, migrate.ErrInvalid):
		code = c.fail(cmd, &argError{msg: err.Error()})
	default:
		code = c.fail(cmd, err)
	}
	return code
}

// refusals is the list of reasons in a refusal, one a line.
func refusals(err error) string {
	var j interface{ Unwrap() []error }
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.As(e, &j) {
			var lines []string
			for _, x := range j.Unwrap() {
				lines = append(lines, x.Error())
			}
			return strings.Join(lines, "\n")
		}
	}
	return err.Error()
}

// showRow renders one row: "<shard>: <what> <before> -> <to> (source <from>)".
func showRow(r migrate.Row, dry bool) string {
	verb := map[migrate.Action]string{
		migrate.Write: "written", migrate.Create: "row created", migrate.Request: "requested from the holder",
		migrate.Unchanged: "unchanged", migrate.Skip: "skipped", migrate.Refused: "refused",
	}[r.Action]
	if dry {
		verb = map[migrate.Action]string{
			migrate.Write: "would write", migrate.Create: "would create the row", migrate.Request: "would request from the holder",
			migrate.Unchanged: "unchanged", migrate.Skip: "skipped", migrate.Refused: "refused",
		}[r.Action]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", r.Shard, verb)
	switch r.Action {
	case migrate.Write, migrate.Request, migrate.Refused:
		fmt.Fprintf(&b, " %s -> %s", r.Before, r.To)
	case migrate.Unchanged:
		fmt.Fprintf(&b, " %s", r.Before)
	}
	fmt.Fprintf(&b, " (source %s)", r.From)
	if r.Note != "" {
		fmt.Fprintf(&b, "; %s", r.Note)
	}
	return b.String() // a refusal's reason follows on stderr
}
