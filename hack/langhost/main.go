// tfk8s's Pulumi Python language host: `pulumi-language-python`, written from the public plugin contract.
//
// The `pulumi` CLI starts this executable (found next to the CLI or on PATH) with the engine's
// address as its last argument, reads the port it prints on stdout, and calls the
// `pulumirpc.LanguageRuntime` service. Why our own: the official host is not served by the Go
// module proxy this project builds its toolchain from; users with the official installers keep the
// official host (nothing here is declared in Pulumi.yaml).
//
// Why Go: the CLI starts its language host twice per `preview` or `up` (About, then the run) and
// waits for its port each time. The host this replaces was Python, in a virtualenv of its own:
// ~90 ms per start (the interpreter, grpc, protobuf), both on every command's critical path; this
// one starts in a few milliseconds (docs/operations/toolchain.md).
//
// Design: each `Run` starts the program in a child process with the *project's* interpreter (the
// `virtualenv` runtime option, as the official host does), through run_program.py, installed
// beside this executable in `langhost/`. A child keeps the program's imports, event loop and
// crashes out of the host, makes `Cancel` a signal to one process, and lets the host serve any
// project, whatever its virtualenv. Exit code 32 from the child means "bail": the program already
// reported its error through the engine, so the CLI shows that message alone.
package main

import (
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
)

// The largest message the CLI may send (a Run's config, a big stack's ProgramInfo): as the SDKs allow.
const maxMessageBytes = 400 * 1024 * 1024

// engineAddressFrom: the CLI passes flags (`-v=9`, `--tracing X`, `--logtostderr`) first and the
// engine address last.
func engineAddressFrom(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[len(args)-1], "-") {
		return ""
	}
	return args[len(args)-1]
}

// runProgramPath: run_program.py as hack/tools.sh installs it, in `langhost/` beside this executable.
func runProgramPath() (string, error) {
	executable, err := os.Executable()
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(executable); err == nil {
		executable = resolved
	}
	return filepath.Join(filepath.Dir(executable), "langhost", "run_program.py"), nil
}

func serve(args []string) error {
	runProgram, err := runProgramPath()
	if err != nil {
		return err
	}
	h := newHost(engineAddressFrom(args), runProgram)
	server := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(math.MaxInt32))
	pulumirpc.RegisterLanguageRuntimeServer(server, h)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Before the port is printed: a CLI may stop the host as soon as it has read it. The CLI stops
	// its plugins with SIGINT when it is done: a normal end, status 0, as is its end of stdin.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { _ = server.Serve(listener) }()
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	parentGone := make(chan struct{})
	var gone sync.Once
	ended := func() { gone.Do(func() { close(parentGone) }) }
	if stdinIsPipe() {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			ended()
		}()
	}
	if parent := os.Getppid(); parent > 1 {
		// Also with a pipe: the pipe may be one the CLI passed on from its own stdin, which another
		// process holds open after the CLI died (a quick-start run of the suite found a host alive
		// for good that way). Without one (by hand, or a CLI path that gives none), this alone
		// ends the host when its parent does, as seen within a poll.
		go func() {
			for os.Getppid() == parent {
				time.Sleep(parentPoll)
			}
			ended()
		}()
	}
	select {
	case <-stop:
	case <-parentGone:
	}
	h.stopChildren()
	server.Stop()
	return nil
}

// parentPoll: how often a host without a stdin pipe looks for its parent.
const parentPoll = 200 * time.Millisecond

// stdinIsPipe: whether this host was started as the CLI starts its plugins, with a pipe as stdin
// that the CLI holds and never writes to. End of file on it then means the CLI closed it or died.
// A CLI that fails early (a missing passphrase) exits without stopping the host it started; the
// host ends with it, at once. (Watching the parent's pid once a second left it up to 1 s behind,
// and for good had it read the pid after the CLI had died.) A host started by hand, with a
// terminal or /dev/null as stdin, runs until a signal.
func stdinIsPipe() bool {
	info, err := os.Stdin.Stat()
	return err == nil && info.Mode()&os.ModeNamedPipe != 0
}

func main() {
	if err := serve(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pulumi-language-python (tfk8s):", err)
		os.Exit(1)
	}
}
