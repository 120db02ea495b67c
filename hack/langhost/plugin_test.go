package main

// Plugins the CLI asks the host to run (RunPlugin) or install (InstallDependencies with IsPlugin):
// a source-based resource plugin and a policy pack, run through fake interpreters (shell scripts)
// so that their argv, directory and environment can be read back, and stopping a real child.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// recorded is a server stream that keeps what the host sends.
type recorded[T any] struct {
	grpc.ServerStream
	ctx  context.Context
	mu   sync.Mutex
	sent []*T
}

func (s *recorded[T]) Context() context.Context { return s.ctx }

func (s *recorded[T]) Send(message *T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, message)
	return nil
}

// output is what a RunPlugin stream carried: stdout, stderr, and the exit code (-2 when none came).
func (s *recorded[T]) output() (stdout, stderr string, exitcode int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exitcode = -2
	var out, errs strings.Builder
	for _, message := range s.sent {
		switch m := any(message).(type) {
		case *pulumirpc.RunPluginResponse:
			out.Write(m.GetStdout())
			errs.Write(m.GetStderr())
			if code, ok := m.Output.(*pulumirpc.RunPluginResponse_Exitcode); ok {
				exitcode = code.Exitcode
			}
		case *pulumirpc.InstallDependenciesResponse:
			out.Write(m.Stdout)
			errs.Write(m.Stderr)
		}
	}
	return out.String(), errs.String(), exitcode
}

// interpreter writes an executable shell script at `path`, standing in for Python.
func interpreter(t *testing.T, path, script string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// pluginRequest: what the CLI's ExecPlugin sends for a plugin in `dir` (NewProgramInfo(dir, dir, ".", options)).
func pluginRequest(t *testing.T, kind, dir, pwd string, options map[string]any, env ...string) *pulumirpc.RunPluginRequest {
	t.Helper()
	opts, err := structpb.NewStruct(options)
	if err != nil {
		t.Fatal(err)
	}
	return &pulumirpc.RunPluginRequest{
		Kind: kind, Pwd: pwd, Args: []string{"--flag", "a b"}, Env: env,
		Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir, EntryPoint: ".", Options: opts},
	}
}

func TestAPluginsVirtualenvDefaultsToVenvWithPipAsTheOfficialHostsDoes(t *testing.T) {
	for _, c := range []struct {
		options map[string]any
		want    string // relative to the root
	}{
		{map[string]any{}, "venv"},
		{map[string]any{"toolchain": "pip"}, "venv"},
		{map[string]any{"toolchain": "uv"}, ".venv"},
		{map[string]any{"virtualenv": "env"}, "env"},
	} {
		p := project(t, c.options)
		p.IsPlugin = true
		if got, err := p.Virtualenv(); err != nil || got != filepath.Join(p.Root, c.want) {
			t.Errorf("a plugin with %v: virtualenv %q (%v), want %q", c.options, got, err, c.want)
		}
	}
}

func TestInstallingAPluginInstallsItsRequirementsIntoItsVenv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte("pulumi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	interpreter(t, filepath.Join(dir, "venv", "bin", "python"), `echo "$0 $*"`+"\n")
	options, _ := structpb.NewStruct(map[string]any{"toolchain": "pip"})
	stream := &recorded[pulumirpc.InstallDependenciesResponse]{ctx: context.Background()}
	request := &pulumirpc.InstallDependenciesRequest{
		IsPlugin: true, Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir, EntryPoint: ".", Options: options},
	}
	if err := newHost("", "").InstallDependencies(request, stream); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s -m pip install -r %s\n", filepath.Join(dir, "venv", "bin", "python"), filepath.Join(dir, "requirements.txt"))
	if stdout, _, _ := stream.output(); stdout != want {
		t.Errorf("ran %q, want %q", stdout, want)
	}
}

func TestRunPluginRunsAResourcePluginsMainAndAPolicyPackByKind(t *testing.T) {
	// The fake interpreter reports its argv, directory and environment, and fails as a provider
	// that cannot start does: a word on stderr and a non-zero exit, both of which reach the CLI.
	script := `for a in "$@"; do echo "arg $a"; done
echo "pwd $(pwd -P)"
echo "probe $TFK8S_PROBE"
echo "unbuffered $PYTHONUNBUFFERED"
echo "cannot start: ImportError" >&2
exit 3
`
	pwd, err := filepath.EvalSymlinks(t.TempDir()) // the CLI's working directory
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TFK8S_PROBE", "host") // the CLI's environment (request.Env) wins over the host's own
	for _, c := range []struct {
		kind string
		args func(dir string) []string
	}{
		{"resource", func(dir string) []string { return []string{"-u", dir, "--flag", "a b"} }},
		{"analyzer", func(dir string) []string { return []string{"-u", "-m", "pulumi.policy", "--flag", "a b", dir} }},
	} {
		t.Run(c.kind, func(t *testing.T) {
			dir := t.TempDir()
			if c.kind == "resource" { // a plugin: its `venv`, though the options name none
				interpreter(t, filepath.Join(dir, "venv", "bin", "python"), script)
			} else { // a policy pack without a virtualenv: PULUMI_PYTHON_CMD
				python := filepath.Join(t.TempDir(), "python")
				interpreter(t, python, script)
				t.Setenv("PULUMI_PYTHON_CMD", python)
			}
			stream := &recorded[pulumirpc.RunPluginResponse]{ctx: context.Background()}
			request := pluginRequest(t, c.kind, dir, pwd, map[string]any{"toolchain": "pip"}, "TFK8S_PROBE=cli")
			if err := newHost("", "").RunPlugin(request, stream); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := stream.output()
			var want strings.Builder
			for _, arg := range c.args(dir) {
				fmt.Fprintf(&want, "arg %s\n", arg)
			}
			fmt.Fprintf(&want, "pwd %s\nprobe cli\nunbuffered 1\n", pwd)
			if stdout != want.String() {
				t.Errorf("stdout\n%s\nwant\n%s", stdout, want.String())
			}
			if stderr != "cannot start: ImportError\n" || code != 3 {
				t.Errorf("stderr %q, exit code %d: want the plugin's stderr and its code 3", stderr, code)
			}
		})
	}
}

func TestAPluginWithoutItsVenvSaysSoOnStderr(t *testing.T) {
	dir := t.TempDir()
	stream := &recorded[pulumirpc.RunPluginResponse]{ctx: context.Background()}
	if err := newHost("", "").RunPlugin(pluginRequest(t, "resource", dir, dir, map[string]any{}), stream); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := stream.output()
	if !strings.Contains(stderr, filepath.Join(dir, "venv")+" does not exist") || code != 1 {
		t.Errorf("stderr %q, exit code %d", stderr, code)
	}
}

// runUntilCancelled starts a plugin whose fake interpreter writes a pid to $PIDFILE and then runs
// on, cancels the stream once the pid is there, and returns the pid and how long RunPlugin took to
// return after the cancel (failing the test after 10 s).
func runUntilCancelled(t *testing.T, script string) (int, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	interpreter(t, filepath.Join(dir, "venv", "bin", "python"), script)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &recorded[pulumirpc.RunPluginResponse]{ctx: ctx}
	returned := make(chan error, 1)
	go func() {
		returned <- newHost("", "").RunPlugin(pluginRequest(t, "resource", dir, dir, map[string]any{}, "PIDFILE="+pidFile), stream)
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the plugin never started")
		}
		text, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(text)))
	}
	t.Cleanup(func() {
		if t.Failed() { // a host that does not stop it: leave no sleeper behind
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cancel() // as the CLI closes a plugin
	cancelled := time.Now()
	select {
	case err := <-returned:
		if status.Code(err) != codes.Canceled {
			t.Errorf("RunPlugin returned %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunPlugin did not return after its stream was cancelled")
	}
	return pid, time.Since(cancelled)
}

func TestACancelledStreamKillsThePlugin(t *testing.T) {
	// A provider serves until it is stopped: this one sleeps, in the process the host started.
	pid, took := runUntilCancelled(t, "echo $$ > \"$PIDFILE\"\nexec sleep 600\n")
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the plugin (pid %d) is still there after the cancel: %v", pid, err)
	}
	if took > 2*time.Second {
		t.Errorf("RunPlugin took %s to return after the cancel", took)
	}
}

func TestForwardingEndsThoughSomethingThePluginStartedHoldsItsOutput(t *testing.T) {
	// What the plugin leaves running inherits its stdout and stderr. The host does not kill it (the
	// plugin is no process group of the host's), but it stops waiting for it: the CLI must not hang.
	defer func(grace time.Duration) { drainGrace = grace }(drainGrace)
	drainGrace = 200 * time.Millisecond
	grandchild, took := runUntilCancelled(t, "sleep 600 &\necho $! > \"$PIDFILE\"\nwait\n")
	_ = syscall.Kill(grandchild, syscall.SIGKILL)
	if took > drainGrace+2*time.Second {
		t.Errorf("RunPlugin took %s to return after the cancel", took)
	}
}
