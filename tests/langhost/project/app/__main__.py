"""What the language host hands a program, exported so the tests can check it; `mode` picks a failure."""

import os
import sys
import time
from pathlib import Path

import pulumi

config = pulumi.Config()
mode = config.get("mode") or "ok"
print(f"dry-run={pulumi.runtime.is_dry_run()}")

if mode == "run-error":
    raise pulumi.RunError("hostcheck:mode: the program refused; fix: set mode to ok")
if mode == "bug":
    {}["missing"]
if mode == "exit":
    sys.stdout.flush()
    os._exit(3)
if mode == "sleep":
    # Whole or not at all: the test polls for the file and reads it at once.
    pid_file = Path(config.require("pidFile"))
    pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
    pid_file.with_suffix(".tmp").rename(pid_file)
    time.sleep(600)

debug_logs = config.get_int("debugLogs")
if debug_logs:  # many debug messages, the last as the program ends, then a warning
    for n in range(debug_logs):
        pulumi.log.debug(f"hostcheck debug {n}")
    pulumi.log.warn("hostcheck warning after the debug messages")

markers = config.get("markerDir")
if markers:  # what the program's process does as it ends: its exit handlers, not the interpreter's teardown
    import atexit
    import types

    atexit.register(lambda: (Path(markers) / "atexit").write_text("ran"))

    class Teardown:
        """Kept alive by a module until the interpreter tears its modules down, if it does."""

        def __del__(self, path: str = str(Path(markers) / "teardown"), open_=os.open, close=os.close) -> None:
            close(open_(path, os.O_CREAT | os.O_WRONLY))

    kept = types.ModuleType("hostcheck_teardown")
    kept.marker = Teardown()  # type: ignore[attr-defined]
    sys.modules[kept.__name__] = kept

pulumi.export("cwd", os.getcwd())
pulumi.export("python", sys.executable)
pulumi.export("virtualEnv", os.environ.get("VIRTUAL_ENV"))
pulumi.export("project", pulumi.get_project())
pulumi.export("stack", pulumi.get_stack())
pulumi.export("plain", config.get("plain"))
pulumi.export("hidden", config.get_secret("hidden"))
