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
    Path(config.require("pidFile")).write_text(str(os.getpid()))
    time.sleep(600)

pulumi.export("cwd", os.getcwd())
pulumi.export("python", sys.executable)
pulumi.export("virtualEnv", os.environ.get("VIRTUAL_ENV"))
pulumi.export("project", pulumi.get_project())
pulumi.export("stack", pulumi.get_stack())
pulumi.export("plain", config.get("plain"))
pulumi.export("hidden", config.get_secret("hidden"))
