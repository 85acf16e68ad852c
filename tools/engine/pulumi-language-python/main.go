// Command pulumi-language-python is a small Python language host for the Pulumi engine.
//
// Upstream's language host is a Go module of its own that is published without version tags, and the Go
// module proxy reachable from our machines does not serve it, so scripts/install-engine cannot build it.
// This is our own replacement, written against the pinned github.com/pulumi/pulumi/sdk/v3 module: it uses
// the SDK's gRPC definitions and its Python toolchain package (virtualenv lookup, pip), and runs programs
// with the `pulumi-language-python-exec` script that the same SDK module ships (installed next to this
// binary by scripts/install-engine).
//
// What it supports: Pulumi.yaml `runtime: python` programs with the `virtualenv` and `toolchain`
// (pip, poetry, uv) options, plugin discovery from the `pulumi-plugin.json` files of installed packages,
// `pulumi about`, and the dependency list. What it does not: installing dependencies (the engine runs
// offline; the virtualenv must already exist), the `typechecker` option, debugging, Python plugins
// (RunPlugin), code generation, packing and linking SDKs.
//
// If PULUMI_RUNTIME_VIRTUALENV is set and Pulumi.yaml has no `virtualenv` option, that virtualenv is used
// (the dynamic provider shim `pulumi-resource-pulumi-python` reads the same variable).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

// execScriptName is the Python entry point that configures the SDK and runs the user's program.
const execScriptName = "pulumi-language-python-exec"

// bailExitCode is what the exec script exits with after it has already shown the user an actionable
// message: the engine then stops without printing another error.
const bailExitCode = 32

func main() {
	tracing := flag.String("tracing", "", "Zipkin-compatible tracing endpoint, passed on to the program")
	showVersion := flag.Bool("version", false, "Print the plugin version and exit")
	executor := flag.String("use-executor", "", "Path of the exec script (default: next to this binary)")
	flag.Parse()

	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	logging.InitLogging(false, 0, false)

	execScript := *executor
	if execScript == "" {
		self, err := os.Executable()
		if err != nil {
			fatal(fmt.Errorf("could not find this executable: %w", err))
		}
		execScript = filepath.Join(filepath.Dir(self), execScriptName)
	}
	if _, err := os.Stat(execScript); err != nil {
		fatal(fmt.Errorf("missing %s next to the language host (run scripts/install-engine): %w",
			execScriptName, err))
	}

	var engineAddress string
	if args := flag.Args(); len(args) > 0 {
		engineAddress = args[0]
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cancelServer := make(chan bool)
	go func() {
		<-ctx.Done()
		close(cancelServer)
	}()
	if engineAddress != "" {
		// Exit when the engine goes away.
		if err := rpcutil.Healthcheck(ctx, engineAddress, 5*time.Minute, stop); err != nil {
			fatal(fmt.Errorf("could not start the engine health check: %w", err))
		}
	}

	host := newHost(execScript, engineAddress, *tracing)
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancelServer,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		fatal(fmt.Errorf("could not start the language host server: %w", err))
	}
	// The engine reads the port from our first line of output.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fatal(fmt.Errorf("language host server stopped: %w", err))
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	execScript    string
	engineAddress string
	tracing       string

	cancelCtx  context.Context // cancelled by the Cancel RPC
	cancelFunc context.CancelFunc
}

func newHost(execScript, engineAddress, tracing string) *host {
	ctx, cancel := context.WithCancel(context.Background())
	return &host{
		execScript:    execScript,
		engineAddress: engineAddress,
		tracing:       tracing,
		cancelCtx:     ctx,
		cancelFunc:    cancel,
	}
}

// pythonToolchain resolves the Python environment of a program from its Pulumi.yaml runtime options.
func pythonToolchain(info *pulumirpc.ProgramInfo) (toolchain.Toolchain, error) {
	if info == nil {
		return nil, errors.New("the engine sent no program information")
	}
	opts := toolchain.PythonOptions{Root: info.RootDirectory, ProgramDir: info.ProgramDirectory}
	options := map[string]any{}
	if info.Options != nil {
		options = info.Options.AsMap()
	}
	for key, value := range options {
		s, ok := value.(string)
		switch key {
		case "virtualenv":
			if !ok {
				return nil, errors.New("the virtualenv option must be a string")
			}
			opts.Virtualenv = s
		case "toolchain":
			if !ok {
				return nil, errors.New("the toolchain option must be a string")
			}
			switch s {
			case "pip":
				opts.Toolchain = toolchain.Pip
			case "poetry":
				opts.Toolchain = toolchain.Poetry
			case "uv":
				opts.Toolchain = toolchain.Uv
			default:
				return nil, fmt.Errorf("unsupported toolchain option: %q", s)
			}
		case "typechecker":
			if s != "" {
				return nil, errors.New("the typechecker option is not supported by this language host " +
					"(tools/engine/pulumi-language-python); run mypy or pyright yourself")
			}
		}
	}
	if opts.Virtualenv == "" && (opts.Toolchain == toolchain.Auto || opts.Toolchain == toolchain.Pip) {
		opts.Virtualenv = os.Getenv("PULUMI_RUNTIME_VIRTUALENV")
	}
	return toolchain.ResolveToolchain(opts)
}

func (h *host) Handshake(
	ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if h.engineAddress == "" {
		h.engineAddress = req.EngineAddress
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.cancelFunc()
	return &emptypb.Empty{}, nil
}

func (h *host) RuntimeOptionsPrompts(
	context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

// listPluginsScript prints, as JSON, every installed distribution with the parsed pulumi-plugin.json that
// sits at the top of one of its packages (null when it has none).
const listPluginsScript = `
import importlib.metadata as md, json, sys
seen, out = set(), []
for dist in md.distributions():
    name = dist.metadata["Name"]
    if not name or name.lower() in seen:
        continue
    seen.add(name.lower())
    found = None
    for f in dist.files or ():
        if f.name == "pulumi-plugin.json" and len(f.parts) == 2:
            try:
                found = json.loads(f.read_text())
            except Exception:
                found = None
            break
    out.append({"name": name, "version": dist.version, "plugin": found})
json.dump(out, sys.stdout)
`

type installedPackage struct {
	Name    string                   `json:"name"`
	Version string                   `json:"version"`
	Plugin  *plugin.PulumiPluginJSON `json:"plugin"`
}

var plainVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

func (h *host) GetRequiredPackages(
	ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	tc, err := pythonToolchain(req.Info)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}
	cmd, err := tc.Command(ctx, "-c", listPluginsScript)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the installed Pulumi packages: %w%s", err, stderrOf(err))
	}
	var pkgs []installedPackage
	if err := json.Unmarshal(out, &pkgs); err != nil {
		return nil, fmt.Errorf("listing the installed Pulumi packages: %w", err)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })

	var deps []*pulumirpc.PackageDependency
	for _, p := range pkgs {
		if p.Plugin == nil || !p.Plugin.Resource {
			continue
		}
		name := p.Plugin.Name
		if name == "" {
			name = strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(p.Name), "_", "-"), "pulumi-")
		}
		v := p.Plugin.Version
		if v == "" {
			if !plainVersion.MatchString(p.Version) {
				logging.V(5).Infof("skipping %s: no plugin version for package version %s", p.Name, p.Version)
				continue
			}
			v = p.Version
		}
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		dep := &pulumirpc.PackageDependency{Name: name, Kind: "resource", Version: v, Server: p.Plugin.Server}
		if pz := p.Plugin.Parameterization; pz != nil {
			dep.Parameterization = &pulumirpc.PackageParameterization{
				Name: pz.Name, Version: pz.Version, Value: pz.Value,
			}
		}
		deps = append(deps, dep)
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: deps}, nil
}

func (h *host) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "use GetRequiredPackages")
}

func stderrOf(err error) string {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && len(exitErr.Stderr) > 0 {
		return "\n" + string(exitErr.Stderr)
	}
	return ""
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	if req.GetAttachDebugger() {
		return &pulumirpc.RunResponse{Error: "debugging is not supported by this language host"}, nil
	}
	tc, err := pythonToolchain(req.Info)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}

	args := []string{h.execScript}
	add := func(flag, value string) {
		if value != "" {
			args = append(args, "--"+flag, value)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engineAddress)
	add("project", req.GetProject())
	add("root_directory", req.GetInfo().GetRootDirectory())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("tracing", h.tracing)
	add("organization", req.GetOrganization())
	entry := req.GetInfo().GetEntryPoint()
	if entry == "" {
		entry = "."
	}
	args = append(args, entry)
	args = append(args, req.GetArgs()...)

	// Stop the program when the engine cancels or the request ends.
	runCtx, cancel := context.WithCancel(h.cancelCtx)
	defer cancel()
	context.AfterFunc(ctx, cancel)

	cmd, err := tc.Command(runCtx, args...)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr

	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if cfg := req.GetConfig(); cfg != nil {
		encoded, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("encoding the stack configuration: %w", err)
		}
		env = append(env, "PULUMI_CONFIG="+string(encoded))
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	encodedKeys, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("encoding the secret configuration keys: %w", err)
	}
	env = append(env, "PULUMI_CONFIG_SECRET_KEYS="+string(encodedKeys))
	cmd.Env = env

	if err := cmd.Run(); err != nil {
		// Python may die before flushing: make sure what it wrote reaches the engine.
		_ = os.Stdout.Sync()
		_ = os.Stderr.Sync()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("could not run the Python program (%s): %v", cmd.Path, err),
			}, nil
		}
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.ExitStatus() == bailExitCode {
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("program exited with non-zero exit code: %d", exitErr.ExitCode()),
		}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

func (h *host) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest,
	server grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	tc, err := pythonToolchain(req.Info)
	if err != nil {
		return err
	}
	if err := tc.ValidateVenv(server.Context()); err != nil {
		return fmt.Errorf("%w\nthis engine build installs no Python packages: create the virtualenv "+
			"yourself (in this repository: pip install -e '.[test]' into .venv)", err)
	}
	return server.Send(&pulumirpc.InstallDependenciesResponse{
		Stdout: []byte("Python dependencies are managed outside Pulumi here; nothing to install.\n"),
	})
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, err := pythonToolchain(req.Info)
	if err != nil {
		return nil, err
	}
	info, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: info.PythonExecutable,
		Version:    info.PythonVersion.String(),
		Metadata:   map[string]string{"languageHost": "tools/engine/pulumi-language-python"},
	}, nil
}

func (h *host) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, err := pythonToolchain(req.Info)
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.TransitiveDependencies)
	if err != nil {
		return nil, err
	}
	deps := make([]*pulumirpc.DependencyInfo, 0, len(pkgs))
	for _, p := range pkgs {
		deps = append(deps, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: deps}, nil
}
