"""`tfk8s-gitops <command>`: the one GitOps command CI and the tests run (docs/guide/gitops.md), as
`hack/gitops.sh <command>` in a checkout.

  plan    --base B [--head H] [--json]         the stacks B..H touches, in order (and each one's wave)
  preview --base B [--head H] [--summary F]    a pull request: previews with the policy pack
  apply   --base B [--head H] [--only STACK]   a merge: destroys, then ups, in order
          [--parallel N]                       N at once where the order allows (a fleet of tenants)
  preview --recorded-state DIR ...             a pull request's job: its experiments, as the preview identity
  preview-state --base B [--head H] --out DIR  the team's job: export the state those previews start from
  preview-kubeconfig [--duration 1h]           the team's job: the preview identity's kubeconfig, a token minted now
  drift   [--summary F]                        a schedule: refresh --preview-only of every stack
  operator-stack STACK --repo URL ...          the Pulumi Kubernetes Operator's objects for STACK

The Pulumi environment (PULUMI_BACKEND_URL, the passphrase, KUBECONFIG, PATH) comes from the
caller (hack/gitops.sh checks it first; `preview`, `apply` and `drift` fail without it). Exit
code: 0 when every step succeeded, 1 when one failed or drifted, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tfk8s.errors import Tfk8sError

from tfk8s_gitops import drift, operator, pipeline, summary
from tfk8s_gitops.identity import preview_kubeconfig
from tfk8s_gitops.plan import make_plan
from tfk8s_gitops.recorded_state import Recorded
from tfk8s_gitops.repo import Repo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfk8s-gitops", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=Path.cwd(), help="the git checkout (default: .)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("plan", "preview", "apply", "preview-state"):
        command = commands.add_parser(name)
        command.add_argument("--base", required=True, help="the commit the change starts from (0000... for none)")
        command.add_argument("--head", default="HEAD", help="the commit the change ends at, checked out (default: HEAD)")
    commands.choices["plan"].add_argument(
        "--json", action="store_true", help="one {stack, action, kind, reason, wave} per step, for a CI matrix per wave"
    )
    _add_apply_options(commands.choices["apply"])
    commands.choices["preview"].add_argument(
        "--recorded-state",
        type=Path,
        metavar="DIR",
        help="a pull request's job: preview its experiments against the state `preview-state` exported, as the "
        "environment's identity (the preview identity), in a scratch backend; platforms and tenants are left to the team's job",
    )
    commands.choices["preview-state"].add_argument(
        "--out", type=Path, required=True, help="the directory to export into (the job's artifact)"
    )
    minted = commands.add_parser(
        "preview-kubeconfig", help="print a kubeconfig of the preview identity, with a token minted now (the team's job)"
    )
    minted.add_argument("--duration", default="1h", help="how long the token is good for (kubectl's --duration)")
    commands.add_parser("drift")
    for name in ("preview", "apply", "drift"):
        _add_run_options(commands.choices[name])
    operator.add_arguments(commands.add_parser("operator-stack", help=operator.__doc__))
    return parser


def _add_apply_options(apply: argparse.ArgumentParser) -> None:
    """What a merge's run alone takes: one step, and the confirmations of what it would not do unasked."""
    apply.add_argument("--only", metavar="STACK", help="run this one step of the plan (one CI job per stack)")
    apply.add_argument(
        "--confirm-destroy",
        metavar="STACK",
        action="append",
        default=[],
        help="destroy this platform or tenant, whose stack file the change removes (repeatable); without it, refused",
    )
    apply.add_argument("--confirm-config-dir-move", action="store_true", help="apply although Pulumi.yaml's stackConfigDir moved")
    apply.add_argument(
        "--force-conflicts",
        action="store_true",
        help="the repository wins over hand edits: take over fields another field manager (kubectl) changed",
    )


def _add_run_options(command: argparse.ArgumentParser) -> None:
    """What every run that calls `pulumi` takes (preview, apply, drift)."""
    command.add_argument("--summary", type=Path, help="write the Markdown report here too (default: stdout only)")
    command.add_argument("--policy-pack", type=Path, help="default: <checkout>/policies; 'none' runs no pack")
    command.add_argument("--lock-wait", type=float, default=600.0, help="seconds to wait for another run's stack lock")
    command.add_argument("--secrets-provider", default=os.environ.get("TFK8S_SECRETS_PROVIDER"), help="for stacks created here")
    command.add_argument(
        "--parallel",
        type=_positive,
        default=1,
        metavar="N",
        help="run up to N stacks at once where the plan's order allows (a stack after the stacks it builds on; "
        "two tenants of one platform at once); default 1: one by one, in order. A platform team onboarding "
        "many tenants: start at 4 on a 2-core CI runner (each stack is a `pulumi` process, its program and "
        "its policy pack)",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def _options(args: argparse.Namespace, checkout: Path) -> pipeline.Options:
    pack: Path | None = args.policy_pack or checkout / "policies"
    if str(pack) == "none":
        pack = None
    elif pack is not None and not (pack / ".venv" / ".installed").exists():
        raise SystemExit(f"--policy-pack {pack}: its virtualenv is missing; run `make policy-venv` first")
    env = dict(os.environ)
    if getattr(args, "force_conflicts", False):
        # The provider's own switch: server-side apply with force, for every object of the run.
        env[pipeline.FORCE_CONFLICTS_ENV] = "true"
    return pipeline.Options(
        checkout,
        env,
        pack,
        args.secrets_provider,
        args.lock_wait,
        confirmed_destroys=tuple(getattr(args, "confirm_destroy", ())),
        confirmed_config_dir_move=getattr(args, "confirm_config_dir_move", False),
        parallel=args.parallel,
        recorded_state=Recorded.read(args.recorded_state) if getattr(args, "recorded_state", None) else None,
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "preview-kubeconfig":  # no checkout: the workflow's job runs it beside two
        print(json.dumps(preview_kubeconfig(os.environ, args.duration)))
        return 0
    checkout = Path(Repo(args.checkout).git("rev-parse", "--show-toplevel").strip())
    repo = Repo(checkout)
    if args.command == "operator-stack":
        print(operator.render_yaml(repo, args), end="")
        return 0
    start = time.monotonic()
    if args.command == "drift":
        report = drift.check(checkout, _options(args, checkout))
    else:
        plan = make_plan(repo, args.base, args.head)
        if args.command == "plan":
            waves = plan.waves()
            steps = [
                {"stack": s.stack, "action": s.action, "kind": s.kind, "team": s.team, "reason": s.reason, "wave": waves[s.stack]}
                for s in plan.steps
            ]
            print(json.dumps(steps) if args.json else "\n".join(f"{s.action} {s.stack} ({s.reason})" for s in plan.steps))
            return 0
        if repo.resolve("HEAD") != plan.head:
            raise SystemExit(f"--head {args.head} is {plan.head[:12]} but the checkout is at another commit: check it out first")
        if args.command == "preview-state":
            exported = pipeline.export_recorded_state(plan, checkout, os.environ, args.out)
            print(f"exported the state of {len(exported)} experiment(s) into {args.out}: {', '.join(exported) or 'none'}")
            return 0
        options = _options(args, checkout)
        report = pipeline.preview(plan, options) if args.command == "preview" else pipeline.apply(plan, options, args.only)
    report.seconds = time.monotonic() - start
    text = summary.markdown(report)
    print(text)
    if args.summary:
        args.summary.write_text(text + "\n")
    return 0 if report.ok else 1


def run() -> None:
    """The console script `tfk8s-gitops`. tfk8s's own errors (a user's mistake, a missing
    prerequisite) are one line; anything else is a bug, with its traceback."""
    try:
        sys.exit(main())
    except Tfk8sError as error:
        sys.exit(f"gitops: {error}")


if __name__ == "__main__":
    run()
