package main

// Plugins the CLI asks the host to install (InstallDependencies with IsPlugin), through fake
// interpreters (shell scripts) whose argv can be read back.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
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
