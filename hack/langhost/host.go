package main

// The LanguageRuntime service: identity, the plugins a program needs, `pulumi install`, running
// the program (in a child process, with the project's interpreter, through run_program.py), and
// plugins: policy packs and source-based plugins (a component provider's `__main__.py`).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	version = "0.1.0+tfk8s"
	// The program already reported its error through the engine: the CLI adds no second message.
	bailExitCode = 32
	// How long a cancelled program gets to stop after SIGINT before it is killed.
	cancelGrace = 5 * time.Second
)

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	runProgram string // run_program.py, installed beside this executable

	mu            sync.Mutex
	engineAddress string
	children      map[*exec.Cmd]struct{}
}

func newHost(engineAddress, runProgram string) *host {
	return &host{engineAddress: engineAddress, runProgram: runProgram, children: map[*exec.Cmd]struct{}{}}
}

// programInfo: the project facts the CLI sends with most requests, with the legacy fields as fallback.
func programInfo(info *pulumirpc.ProgramInfo, pwd string) Program {
	program := Program{Root: pwd, Directory: pwd, EntryPoint: ".", Options: map[string]any{}}
	if info == nil {
		return program
	}
	if info.RootDirectory != "" {
		program.Root = info.RootDirectory
	}
	if info.ProgramDirectory != "" {
		program.Directory = info.ProgramDirectory
	}
	if info.EntryPoint != "" {
		program.EntryPoint = info.EntryPoint
	}
	if info.Options != nil {
		program.Options = info.Options.AsMap()
	}
	return program
}

func workingDirectory() string {
	dir, _ := os.Getwd()
	return dir
}

// childCommand is the program runner's argv for one RunRequest.
func childCommand(request *pulumirpc.RunRequest, engineAddress, python, runProgram string) []string {
	root := request.GetInfo().GetRootDirectory()
	if root == "" {
		root = request.Pwd
	}
	argv := []string{
		python, runProgram,
		"--monitor", request.MonitorAddress,
		"--engine", engineAddress,
		"--project", request.Project,
		"--stack", request.Stack,
		"--pwd", request.Pwd,
		"--parallel", fmt.Sprint(request.Parallel),
		"--root-directory", root,
	}
	if request.Organization != "" {
		argv = append(argv, "--organization", request.Organization)
	}
	if request.DryRun {
		argv = append(argv, "--dry-run")
	}
	entry := request.GetInfo().GetEntryPoint()
	if entry == "" {
		entry = request.Program
	}
	if entry == "" {
		entry = "."
	}
	return append(append(argv, entry, "--"), request.Args...)
}

// childEnv: ours, the program's config (as the official host passes it), its virtualenv first on PATH.
func childEnv(request *pulumirpc.RunRequest, program Program) ([]string, error) {
	config, err := json.Marshal(nonNilMap(request.Config))
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(nonNilSlice(request.ConfigSecretKeys))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, item := range os.Environ() {
		if name, value, ok := strings.Cut(item, "="); ok {
			env[name] = value
		}
	}
	env["PULUMI_CONFIG"] = string(config)
	env["PULUMI_CONFIG_SECRET_KEYS"] = string(secretKeys)
	env["PYTHONUNBUFFERED"] = "1"
	venv, err := program.Virtualenv()
	if err != nil {
		return nil, err
	}
	if venv != "" {
		env["VIRTUAL_ENV"] = venv
		env["PATH"] = filepath.Join(venv, "bin") + string(os.PathListSeparator) + env["PATH"]
		delete(env, "PYTHONHOME")
	}
	list := make([]string, 0, len(env))
	for name, value := range env {
		list = append(list, name+"="+value)
	}
	return list, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// interpreterVersion: `3.11.7`, from `python --version`, which the interpreter answers before it
// imports `site` or anything else (2 ms, against 24 ms for running `platform` in the project's
// virtualenv). The CLI asks (About) before every `preview` and `up`, ahead of the program.
func interpreterVersion(python string) string {
	var out strings.Builder
	command := exec.Command(python, "--version")
	command.Stdout, command.Stderr = &out, &out
	_ = command.Run()
	words := strings.Fields(out.String()) // "Python 3.11.7"
	if len(words) == 2 && words[0] == "Python" {
		return words[1]
	}
	return ""
}

// runResponse maps the runner's end to what the CLI expects.
func runResponse(state *os.ProcessState) *pulumirpc.RunResponse {
	if waited, ok := state.Sys().(syscall.WaitStatus); ok && waited.Signaled() {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("the program was stopped by signal %d", int(waited.Signal()))}
	}
	switch code := state.ExitCode(); code {
	case 0:
		return &pulumirpc.RunResponse{}
	case bailExitCode:
		return &pulumirpc.RunResponse{Bail: true}
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("the program exited with code %d", code)}
	}
}

// -- identity ------------------------------------------------------------------------------------

func (h *host) Handshake(_ context.Context, request *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if request.EngineAddress != "" {
		h.mu.Lock()
		h.engineAddress = request.EngineAddress
		h.mu.Unlock()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) About(_ context.Context, request *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	python, err := programInfo(request.Info, workingDirectory()).Python()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &pulumirpc.AboutResponse{
		Executable: python, Version: interpreterVersion(python), Metadata: map[string]string{"host": version},
	}, nil
}

// GetProgramDependencies: the distributions installed in the project's interpreter (`pulumi about` lists them).
func (h *host) GetProgramDependencies(
	_ context.Context, request *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	python, err := programInfo(request.Info, request.Pwd).Python()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	out, err := exec.Command(python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check").Output()
	if err != nil {
		return nil, fmt.Errorf("pip list in %s: %w", python, err)
	}
	var listed []struct{ Name, Version string }
	if err := json.Unmarshal(out, &listed); err != nil {
		return nil, fmt.Errorf("pip list in %s: %w", python, err)
	}
	dependencies := make([]*pulumirpc.DependencyInfo, 0, len(listed))
	for _, d := range listed {
		dependencies = append(dependencies, &pulumirpc.DependencyInfo{Name: d.Name, Version: d.Version})
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: dependencies}, nil
}

// -- plugins the program needs -------------------------------------------------------------------

func (h *host) GetRequiredPackages(
	_ context.Context, request *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	plugins, err := programInfo(request.Info, workingDirectory()).ResourcePlugins()
	if err != nil {
		return nil, err
	}
	packages := make([]*pulumirpc.PackageDependency, 0, len(plugins))
	for _, p := range plugins {
		packages = append(packages, &pulumirpc.PackageDependency{Name: p.Name, Kind: "resource", Version: p.Version, Server: p.Server})
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: packages}, nil
}

func (h *host) GetRequiredPlugins(
	_ context.Context, request *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	plugins, err := programInfo(request.Info, request.Pwd).ResourcePlugins()
	if err != nil {
		return nil, err
	}
	found := make([]*pulumirpc.PluginDependency, 0, len(plugins))
	for _, p := range plugins {
		found = append(found, &pulumirpc.PluginDependency{Name: p.Name, Kind: "resource", Version: p.Version, Server: p.Server})
	}
	return &pulumirpc.GetRequiredPluginsResponse{Plugins: found}, nil
}

// -- dependencies (`pulumi install`) -------------------------------------------------------------

func (h *host) InstallDependencies(
	request *pulumirpc.InstallDependenciesRequest, stream pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	program := programInfo(request.Info, request.Directory)
	program.IsPlugin = request.IsPlugin // a source plugin, as `pulumi package add` and `get-schema` install one
	commands, err := program.InstallCommands()
	if err != nil {
		var toolchain *ToolchainError
		if errors.As(err, &toolchain) {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return err
	}
	for _, command := range commands {
		code, err := h.outputOf(stream.Context(), command, program.Root, os.Environ(), func(stdout, stderr []byte) error {
			return stream.Send(&pulumirpc.InstallDependenciesResponse{Stdout: stdout, Stderr: stderr})
		})
		if err != nil {
			return err
		}
		if code != 0 {
			return status.Errorf(codes.Unknown, "%s exited with code %d", strings.Join(command, " "), code)
		}
	}
	return nil
}

// -- running the program -------------------------------------------------------------------------

func (h *host) Run(_ context.Context, request *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	program := programInfo(request.Info, request.Pwd)
	python, err := program.Python()
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	env, err := childEnv(request, program)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	h.mu.Lock()
	argv := childCommand(request, h.engineAddress, python, h.runProgram)
	h.mu.Unlock()
	child := exec.Command(argv[0], argv[1:]...)
	child.Dir = request.Pwd
	if child.Dir == "" {
		child.Dir = program.Root
	}
	child.Env = env
	child.Stdout, child.Stderr = os.Stdout, os.Stderr // the CLI shows the plugin's output
	if err := h.start(child); err != nil {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("starting the program: %v", err)}, nil
	}
	_ = child.Wait()
	h.forget(child)
	return runResponse(child.ProcessState), nil
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.stopChildren()
	return &emptypb.Empty{}, nil
}

func (h *host) start(child *exec.Cmd) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := child.Start(); err != nil {
		return err
	}
	h.children[child] = struct{}{}
	return nil
}

func (h *host) forget(child *exec.Cmd) {
	h.mu.Lock()
	delete(h.children, child)
	h.mu.Unlock()
}

// stopChildren: SIGINT to every running program, SIGKILL to whatever is left after the grace period.
func (h *host) stopChildren() {
	h.mu.Lock()
	children := make([]*exec.Cmd, 0, len(h.children))
	for child := range h.children {
		children = append(children, child)
	}
	h.mu.Unlock()
	for _, child := range children {
		_ = child.Process.Signal(os.Interrupt)
	}
	deadline := time.Now().Add(cancelGrace)
	for _, child := range children {
		for alive(child) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(child) {
			_ = child.Process.Kill()
		}
	}
}

// alive: whether the child has not ended yet (signal 0 reaches only a live or unreaped process,
// and the goroutine waiting for it reaps it at once).
func alive(child *exec.Cmd) bool {
	return child.Process.Signal(syscall.Signal(0)) == nil
}

// -- plugins: policy packs and source-based plugins ------------------------------------------------

// analyzerKind is RunPluginRequest.Kind for a policy pack (apitype.AnalyzerPlugin).
const analyzerKind = "analyzer"

// pluginCommand is the argv and working directory of the plugin a RunPluginRequest asks for, as the
// official host runs them: a policy pack as `python -u -m pulumi.policy <args> <pack dir>`; any
// other kind (a resource plugin: a component provider) as the plugin directory's `__main__.py`,
// `python -u <plugin dir> <args>`, in the CLI's working directory.
func pluginCommand(request *pulumirpc.RunPluginRequest, program Program, python string) (argv []string, dir string) {
	dir = request.Pwd
	if dir == "" {
		dir = program.Directory
	}
	if request.Kind == analyzerKind {
		pack := request.Program
		if pack == "" {
			pack = program.Directory
		}
		return append(append([]string{python, "-u", "-m", "pulumi.policy"}, request.Args...), pack), dir
	}
	return append([]string{python, "-u", program.Directory}, request.Args...), dir
}

// RunPlugin starts a policy pack or a source-based plugin (pluginCommand) with the CLI's
// environment and streams its output; its stderr is how a plugin that fails to start explains
// itself (the CLI shows it when the plugin "exited prematurely"). A provider serves until stopped:
// the CLI closes it by cancelling this stream, which kills it (outputOf).
func (h *host) RunPlugin(request *pulumirpc.RunPluginRequest, stream pulumirpc.LanguageRuntime_RunPluginServer) error {
	program := programInfo(request.Info, request.Pwd)
	program.IsPlugin = request.Kind != analyzerKind
	python, err := program.Python()
	if err != nil {
		if err := stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: []byte(err.Error() + "\n")}}); err != nil {
			return err
		}
		return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: 1}})
	}
	env := append(os.Environ(), request.Env...)
	env = append(env, "PYTHONUNBUFFERED=1")
	command, dir := pluginCommand(request, program, python)
	code, err := h.outputOf(stream.Context(), command, dir, env, func(stdout, stderr []byte) error {
		if stdout != nil {
			return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: stdout}})
		}
		return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: stderr}})
	})
	if err != nil {
		return err
	}
	return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(code)}})
}

type chunk struct {
	stdout, stderr []byte
	done           bool
}

// drainGrace: how long output is still forwarded after the command was killed. The killed command's
// own ends of its pipes close at once; only something it started and left running (which inherits
// them, and is not killed) can hold them open longer, and forwarding stops without waiting for it.
var drainGrace = time.Second

// outputOf runs `command`, handing its output to `send` as it comes (one stream per call), and
// returns its exit code. When `ctx` ends (the CLI cancels the stream: how it closes a plugin, which
// otherwise serves for good) or a send fails (the CLI went away mid-stream), the command is killed
// and outputOf returns within drainGrace, whatever else holds the command's output open.
func (h *host) outputOf(
	ctx context.Context, command []string, dir string, env []string, send func(stdout, stderr []byte) error,
) (int, error) {
	child := exec.Command(command[0], command[1:]...)
	child.Dir, child.Env = dir, env
	stdout, err := child.StdoutPipe()
	if err != nil {
		return 0, err
	}
	stderr, err := child.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := h.start(child); err != nil {
		return 0, err
	}
	defer h.forget(child)
	chunks := make(chan chunk)
	returned := make(chan struct{})
	defer close(returned)
	pump := func(from io.Reader, isStdout bool) {
		buffer := make([]byte, 65536)
		for {
			n, err := from.Read(buffer)
			if n > 0 {
				data := append([]byte(nil), buffer[:n]...)
				c := chunk{stderr: data}
				if isStdout {
					c = chunk{stdout: data}
				}
				select {
				case chunks <- c:
				case <-returned:
					return
				}
			}
			if err != nil {
				select {
				case chunks <- chunk{done: true}:
				case <-returned:
				}
				return
			}
		}
	}
	go pump(stdout, true)
	go pump(stderr, false)
	var sendErr error
	cancelled := ctx.Done()
	var drained <-chan time.Time
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = child.Process.Kill()
			drained = time.After(drainGrace)
		}
	}
	for open := 2; open > 0; {
		select {
		case c := <-chunks:
			switch {
			case c.done:
				open--
			case sendErr == nil:
				if sendErr = send(c.stdout, c.stderr); sendErr != nil {
					kill()
				}
			}
		case <-cancelled:
			cancelled = nil
			kill()
		case <-drained: // closing our ends of the pipes ends the pumps' reads
			_, _ = stdout.Close(), stderr.Close()
			drained = nil
		}
	}
	_ = child.Wait()
	switch {
	case sendErr != nil:
		return 0, sendErr
	case ctx.Err() != nil:
		return 0, status.FromContextError(ctx.Err()).Err()
	}
	return child.ProcessState.ExitCode(), nil
}
